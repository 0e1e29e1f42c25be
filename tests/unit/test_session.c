/* The run slot of a daemon serving many runs (common/io/session.c): a
 * configure's command line is parsed on fresh options with the base's
 * fixed options, a changed fixed option, a bad value and a refused check
 * are said in one line, a second configure during a run is refused, and
 * each run object is made and ended in turn. */
#include "io/session.h"

#include "sys/log.h"

#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct toy_options {
	uint32_t id;
	uint32_t run;
	uint32_t payload;
	const char *out;
};

#define T struct toy_options
static const struct opt_spec toy_specs[] = {
	OPT_UINT("id", "N", T, id, 0, 9, .required = true, .fixed = true, .help = "which"),
	OPT_UINT("run", "R", T, run, 1, UINT32_MAX, .required = true, .help = "run"),
	OPT_UINT("payload", "B", T, payload, 1, 1000, .def = "64", .help = "bytes"),
	OPT_STRING_REF("out", "DIR", T, out, .help = "where"),
};
#undef T

static struct toy_options base_opts;
static int made, destroyed, stopped;

struct toy_run {
	struct toy_options o;
	int status;
};

static bool toy_check(void *opts, const struct daemon_options *d)
{
	(void)d;
	const struct toy_options *o = opts;
	if (o->payload == 13) {
		fprintf(stderr, "toyd: --payload 13 is unlucky\n");
		return false;
	}
	return true;
}

static void *toy_create(struct event_base *base, const void *opts)
{
	(void)base;
	const struct toy_options *o = opts;
	if (o->payload == 999)
		return NULL;
	struct toy_run *r = calloc(1, sizeof *r);
	r->o = *o;
	r->status = (int)o->run % 2;
	made++;
	return r;
}

static void toy_stop(void *run, const char *why)
{
	(void)run;
	(void)why;
	stopped++;
}

static int toy_status(const void *run)
{
	return ((const struct toy_run *)run)->status;
}

static void toy_destroy(void *run)
{
	destroyed++;
	free(run);
}

static const struct daemon_def toy = {
	.role = "toyd", .synopsis = "--id N --run R", .description = "A toy.", .example = "",
	.specs = toy_specs, .n_specs = sizeof toy_specs / sizeof toy_specs[0],
	.opts = &base_opts, .opts_size = sizeof base_opts, .check = toy_check,
	.create = toy_create, .stop = toy_stop, .exit_status = toy_status, .destroy = toy_destroy,
};

static char *base_argv[] = { "toyd", "--id", "3", "--run", "1", "--payload", "100", NULL };

START_TEST(test_find_arg)
{
	char out[64];
	session_find_arg("--payload=200\n--out\n/data/run-7", "--out", out, sizeof out);
	ck_assert_str_eq(out, "/data/run-7");
	session_find_arg("--out=/a\n--outer=/b\n--out=/c", "--out", out, sizeof out);
	ck_assert_str_eq(out, "/c");            /* the last one, --outer is not it */
	session_find_arg("--payload=200\n--out", "--out", out, sizeof out);
	ck_assert_str_eq(out, "");              /* no value follows */
	session_find_arg("", "--out", out, sizeof out);
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_runs_in_turn)
{
	log_init("test", -1, LOG_LEVEL_ERROR);
	struct event_base *base = event_base_new();
	struct run_slot *s = run_slot_new(&toy, base, 7, base_argv);
	ck_assert_ptr_nonnull(s);
	char err[256];
	char text[] = "--payload=200\n--out\n/data/run-7";
	char *args[8];
	int n = session_split_args(text, args, 8);
	ck_assert_int_eq(n, 3);
	ck_assert(run_slot_configure(s, 7, n, args, err, sizeof err));
	const struct toy_run *r = run_slot_object(s);
	ck_assert_uint_eq(r->o.id, 3);          /* the base's fixed option */
	ck_assert_uint_eq(r->o.run, 7);         /* the configure's run */
	ck_assert_uint_eq(r->o.payload, 200);
	ck_assert_str_eq(r->o.out, "/data/run-7");
	ck_assert_uint_eq(run_slot_run(s), 7);

	char *again[] = { "--payload=5" };
	ck_assert(!run_slot_configure(s, 8, 1, again, err, sizeof err));
	ck_assert_str_eq(err, "toyd is in run 7; stop it first");
	run_slot_stop(s, "test");
	ck_assert_int_eq(stopped, 1);
	ck_assert_int_eq(run_slot_finish(s), 1);    /* run 7: odd, status 1 */
	ck_assert_int_eq(run_slot_finish(s), -1);
	ck_assert_uint_eq(run_slot_run(s), 0);

	/* The next run starts from the defaults, not from the last run. */
	ck_assert(run_slot_configure(s, 8, 0, args, err, sizeof err));
	r = run_slot_object(s);
	ck_assert_uint_eq(r->o.payload, 64);
	ck_assert_ptr_null(r->o.out);
	ck_assert_int_eq(run_slot_finish(s), 0);
	ck_assert_int_eq(made, 2);
	ck_assert_int_eq(destroyed, 2);
	run_slot_free(s);
	event_base_free(base);
}
END_TEST

static void expect_refused(struct run_slot *s, const char *text_in, const char *want)
{
	char text[256], err[256];
	char *args[8];
	snprintf(text, sizeof text, "%s", text_in);
	int n = session_split_args(text, args, 8);
	ck_assert_msg(!run_slot_configure(s, 9, n, args, err, sizeof err), "'%s' accepted", text_in);
	ck_assert_msg(strcmp(err, want) == 0, "'%s': got '%s', want '%s'", text_in, err, want);
	ck_assert_ptr_null(run_slot_object(s));
}

START_TEST(test_refusals)
{
	log_init("test", -1, LOG_LEVEL_ERROR);
	struct event_base *base = event_base_new();
	struct run_slot *s = run_slot_new(&toy, base, 7, base_argv);
	expect_refused(s, "--id=4", "--id is fixed for this daemon's life (3); restart it to "
				    "change it");
	expect_refused(s, "--payload=1001", "--payload: expected an integer from 1 to 1000, "
					    "got '1001'");
	expect_refused(s, "--payload=13", "toyd: --payload 13 is unlucky");
	expect_refused(s, "--colour=red", "toyd: unrecognized option '--colour=red'");
	expect_refused(s, "stray", "toyd: unexpected argument 'stray' (see --help)");
	expect_refused(s, "--payload=999", "toyd could not make run 9 (its log says why)");
	/* The same value of a fixed option is no change. */
	char text[] = "--id=3";
	char *args[2], err[256];
	ck_assert(run_slot_configure(s, 9, session_split_args(text, args, 2), args, err,
				     sizeof err));
	run_slot_free(s);    /* destroys the run object left */
	event_base_free(base);
}
END_TEST

START_TEST(test_split_args)
{
	char empty[] = "", one[] = "--a", many[] = "a\nb\nc";
	char *argv[2];
	ck_assert_int_eq(session_split_args(empty, argv, 2), 0);
	ck_assert_int_eq(session_split_args(one, argv, 2), 1);
	ck_assert_str_eq(argv[0], "--a");
	ck_assert_int_eq(session_split_args(many, argv, 2), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("run_slot");
	tcase_add_test(tc, test_runs_in_turn);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_split_args);
	tcase_add_test(tc, test_find_arg);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
