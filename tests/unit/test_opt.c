/* Unit tests of common/sys/opt.c: each parser accepts what --help promises and
 * refuses the rest, naming the flag; the tables drive parsing, defaults,
 * errors and the usage text. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sys/opt.h"

/* The last message opt_error() printed, captured from stderr. */
static char captured[512];

static bool capture(bool (*fn)(void))
{
	fflush(stderr);
	int saved = dup(2);
	FILE *tmp = tmpfile();
	dup2(fileno(tmp), 2);
	bool ok = fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(captured, 1, sizeof captured - 1, tmp);
	captured[n] = '\0';
	fclose(tmp);
	return ok;
}

static uint64_t u64_out;
static const char *arg;
static bool call_u64(void)
{
	return opt_u64("--rate", arg, 0, 1000000, &u64_out);
}

START_TEST(test_u64)
{
	static const struct {
		const char *arg;
		bool ok;
		uint64_t value;
	} cases[] = {
		{ "0", true, 0 }, { "42", true, 42 }, { "1000000", true, 1000000 },
		{ "50k", true, 50000 }, { "1M", true, 1000000 }, { "4Ki", true, 4096 },
		{ "1000001", false, 0 }, { "2M", false, 0 }, { "-1", false, 0 }, { "", false, 0 },
		{ "fast", false, 0 }, { "12x", false, 0 }, { "99999999999999999999999", false, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		arg = cases[i].arg;
		u64_out = 7;
		ck_assert_msg(capture(call_u64) == cases[i].ok, "'%s'", arg);
		if (cases[i].ok) {
			ck_assert_uint_eq(u64_out, cases[i].value);
		} else {
			ck_assert_uint_eq(u64_out, 7);
			ck_assert_msg(strstr(captured, "--rate: expected an integer from 0 to 1000000") != NULL,
				      "message for '%s': %s", arg, captured);
		}
	}
}
END_TEST

static char host[64];
static uint16_t port;
static bool allow_zero;
static bool call_hostport(void)
{
	return opt_hostport("--listen", arg, host, sizeof host, &port, allow_zero);
}

START_TEST(test_hostport)
{
	allow_zero = true;
	arg = "127.0.0.1:7000";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_uint_eq(port, 7000);
	arg = "[::1]:0";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "::1");
	ck_assert_uint_eq(port, 0);
	arg = "node-3.cluster:65535";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "node-3.cluster");
	allow_zero = false;
	arg = "127.0.0.1:0";
	ck_assert(!capture(call_hostport));
	ck_assert(strstr(captured, "--listen: expected HOST:PORT with a port from 1") != NULL);
	const char *bad[] = { "127.0.0.1", ":80", "host:", "host:65536", "host:8x", "[::1]80" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		arg = bad[i];
		ck_assert_msg(!capture(call_hostport), "'%s' accepted", arg);
		ck_assert(strstr(captured, "--listen:") != NULL);
	}
}
END_TEST

static uint16_t ids[8];
static size_t id_count;
static bool call_ids(void)
{
	return opt_id_list("--sources", arg, ids, 8, &id_count, 100);
}

START_TEST(test_id_list)
{
	arg = "0,1,4-6";
	ck_assert(capture(call_ids));
	ck_assert_uint_eq(id_count, 5);
	ck_assert_uint_eq(ids[0], 0);
	ck_assert_uint_eq(ids[4], 6);
	arg = "3";
	ck_assert(capture(call_ids));
	ck_assert_uint_eq(id_count, 1);
	arg = "1,1";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "ID 1 is listed twice") != NULL);
	arg = "0-8";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "more than 8 IDs") != NULL);
	arg = "99,100";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "ID 100 is out of range") != NULL);
	const char *bad[] = { "", ",", "a", "3-1", "1,,2", "1;2" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		arg = bad[i];
		ck_assert_msg(!capture(call_ids), "'%s' accepted", arg);
	}
}
END_TEST

static int64_t i64_out;
static bool call_i64(void)
{
	return opt_i64("--clock-offset-ns", arg, &i64_out);
}

START_TEST(test_i64)
{
	arg = "-5000000";
	ck_assert(capture(call_i64));
	ck_assert_int_eq(i64_out, -5000000);
	arg = "5e6";
	ck_assert(!capture(call_i64));
	ck_assert(strstr(captured, "--clock-offset-ns: expected a signed integer") != NULL);
}
END_TEST


/* ---- The table machinery ------------------------------------------------ */

enum colour { RED, GREEN, BLUE };
static const char *const colours[] = { "red", "green", "blue", NULL };

struct t_opts {
	uint16_t id;
	uint32_t count;
	uint64_t bytes;
	int64_t offset;
	double ratio;
	char name[8];
	const char *path;
	char host[32];
	uint16_t port;
	bool verbose;
	int colour;
	uint64_t kind_after;
	bool quiet;
};

static bool take_kind(const char *flag, const char *arg, void *opts)
{
	struct t_opts *o = opts;
	if (strncmp(arg, "k@", 2) == 0)
		return opt_u64(flag, arg + 2, 0, 99, &o->kind_after);
	opt_error(flag, "expected k@N, got '%s'", arg);
	return false;
}

#define T struct t_opts
static const struct opt_spec t_specs[] = {
	OPT_UINT("id", "N", T, id, 0, 65535, .required = true, .fixed = true, .group = "Run",
		 .help = "the ID"),
	OPT_UINT("count", "N", T, count, 1, 10, .def = "3", .help = "how many (default {default})"),
	OPT_UINT("bytes", "B", T, bytes, 64, UINT64_MAX, .def = "4Ki",
		 .help = "a long help that goes\non to a second line (default {default})"),
	OPT_INT("offset", "NS", T, offset, .help = "signed"),
	OPT_DOUBLE("ratio", "R", T, ratio, 0.0, 1.0, .def = "0.5", .help = "a fraction"),
	OPT_STRING("name", "NAME", T, name, .group = "Names", .help = "up to 7 bytes"),
	OPT_STRING_REF("path", "PATH", T, path, .help = "kept as given"),
	OPT_HOSTPORT("connect-to-somewhere", "HOST:PORT", T, host, port, 1, .fixed = true,
		     .help = "the left column is wider than its room"),
	OPT_NOTE("--connect-to-somewhere none", .help = "a line of the usage only"),
	OPT_FLAG("verbose", T, verbose, .fixed = true, .help = "say more"),
	OPT_CHOICE("colour", "C", T, colour, colours, .def = "green", .help = "red, green or blue"),
	OPT_CUSTOM("kind", "k@N", take_kind, .help = "custom"),
	OPT_FLAG("hidden", T, quiet),
};
#undef T

struct t_common {
	bool quiet;
};
static const struct opt_spec t_common_specs[] = {
	OPT_FLAG("quiet", struct t_common, quiet, .group = "Other", .help = "log less"),
	{ .name = "help", .kind = OPT_KIND_HELP, .label = "--help, --version", .help = "" },
	{ .name = "version", .kind = OPT_KIND_VERSION },
};

static struct t_opts topt;
static struct t_common tcommon;
static struct opt_record *parse_record;     /* set: parse() records into it */
static char out_text[4096], err_text[4096];

static void read_back(FILE *tmp, char *buf, size_t len)
{
	rewind(tmp);
	size_t n = fread(buf, 1, len - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
}

/* Parses argv (NULL-terminated, after "prog") into fresh structs, stdout
 * and stderr captured. */
static enum opt_result parse(const char *first, ...)
{
	char *argv[32] = { (char *)"prog" };
	int argc = 1;
	va_list ap;
	va_start(ap, first);
	for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	memset(&topt, 0, sizeof topt);
	memset(&tcommon, 0, sizeof tcommon);
	const struct opt_table tables[] = {
		{ t_specs, sizeof t_specs / sizeof t_specs[0], &topt },
		{ t_common_specs, sizeof t_common_specs / sizeof t_common_specs[0], &tcommon },
	};
	const struct opt_program prog = {
		.name = "prog", .version = "9.9", .synopsis = "--id N\n[options]",
		.description = "A test program.", .epilogue = "Environment:\n  X=1  nothing\n",
		.example = "  prog --id 1\n", .tables = tables, .n_tables = 2,
	};
	fflush(stdout);
	fflush(stderr);
	int saved_out = dup(1), saved_err = dup(2);
	FILE *tout = tmpfile(), *terr = tmpfile();
	dup2(fileno(tout), 1);
	dup2(fileno(terr), 2);
	enum opt_result r = opt_parse_recorded(&prog, argc, argv, parse_record);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, 1);
	dup2(saved_err, 2);
	close(saved_out);
	close(saved_err);
	read_back(tout, out_text, sizeof out_text);
	read_back(terr, err_text, sizeof err_text);
	return r;
}

START_TEST(test_table_kinds)
{
	ck_assert_int_eq(parse("--id", "7", "--count", "10", "--bytes", "1Mi", "--offset", "-12",
			       "--ratio", "0.25", "--name", "abc", "--path", "/x/y",
			       "--connect-to-somewhere", "[::1]:80", "--verbose", "--colour", "blue",
			       "--kind", "k@5", "--quiet", NULL), OPT_RESULT_OK);
	ck_assert_str_eq(err_text, "");
	ck_assert_uint_eq(topt.id, 7);
	ck_assert_uint_eq(topt.count, 10);
	ck_assert_uint_eq(topt.bytes, 1048576);
	ck_assert_int_eq(topt.offset, -12);
	ck_assert_double_eq(topt.ratio, 0.25);
	ck_assert_str_eq(topt.name, "abc");
	ck_assert_str_eq(topt.path, "/x/y");
	ck_assert_str_eq(topt.host, "::1");
	ck_assert_uint_eq(topt.port, 80);
	ck_assert(topt.verbose);
	ck_assert_int_eq(topt.colour, BLUE);
	ck_assert_uint_eq(topt.kind_after, 5);
	ck_assert(tcommon.quiet);
	ck_assert(!topt.quiet);
}
END_TEST

START_TEST(test_table_defaults)
{
	ck_assert_int_eq(parse("--id", "0", NULL), OPT_RESULT_OK);
	ck_assert_uint_eq(topt.count, 3);
	ck_assert_uint_eq(topt.bytes, 4096);
	ck_assert_double_eq(topt.ratio, 0.5);
	ck_assert_int_eq(topt.colour, GREEN);
	ck_assert_ptr_null(topt.path);
	ck_assert(!topt.verbose);
	/* A later option wins over the default and over an earlier one. */
	ck_assert_int_eq(parse("--count", "4", "--id", "0", "--count", "5", NULL), OPT_RESULT_OK);
	ck_assert_uint_eq(topt.count, 5);
}
END_TEST

START_TEST(test_table_errors)
{
	static const struct {
		const char *args[4];
		const char *message;
	} cases[] = {
		{ { "--id", "65536" }, "--id: expected an integer from 0 to 65535, got '65536'\n" },
		{ { "--count", "0" }, "--count: expected an integer from 1 to 10, got '0'\n" },
		{ { "--bytes", "63" }, "--bytes: expected an integer from 64 to 18446744073709551615, got '63'\n" },
		{ { "--offset", "1.5" }, "--offset: expected a signed integer, got '1.5'\n" },
		{ { "--ratio", "1.5" }, "--ratio: expected a number from 0 to 1, got '1.5'\n" },
		{ { "--ratio", "nan" }, "--ratio: expected a number from 0 to 1, got 'nan'\n" },
		{ { "--name", "12345678" }, "--name: expected at most 7 bytes, got '12345678'\n" },
		{ { "--connect-to-somewhere", "h:0" },
		  "--connect-to-somewhere: expected HOST:PORT with a port from 1 to 65535, got 'h:0'\n" },
		{ { "--colour", "pink" }, "--colour: expected one of red, green, blue, got 'pink'\n" },
		{ { "--kind", "x@1" }, "--kind: expected k@N, got 'x@1'\n" },
		{ { "--kind", "k@100" }, "--kind: expected an integer from 0 to 99, got '100'\n" },
		{ { "--id", "1", "stray" }, "prog: unexpected argument 'stray' (see --help)\n" },
		{ { "--count", "2" }, "prog: --id is required (see --help)\n" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *const *a = cases[i].args;
		ck_assert_int_eq(parse(a[0], a[1], a[2], a[3], NULL), OPT_RESULT_BAD);
		ck_assert_str_eq(err_text, cases[i].message);
		ck_assert_str_eq(out_text, "");
	}
}
END_TEST

START_TEST(test_table_getopt_errors)
{
	/* getopt's own words, then the usage on stderr. */
	ck_assert_int_eq(parse("--id", "1", "--bogus", NULL), OPT_RESULT_BAD);
	ck_assert(strncmp(err_text, "prog: unrecognized option '--bogus'\nUsage: prog --id N\n", 55) == 0);
	ck_assert_int_eq(parse("--id", NULL), OPT_RESULT_BAD);
	ck_assert(strncmp(err_text, "prog: option '--id' requires an argument\nUsage: ", 48) == 0);
	/* A flag takes no argument. */
	ck_assert_int_eq(parse("--id", "1", "--verbose=yes", NULL), OPT_RESULT_BAD);
	ck_assert(strncmp(err_text, "prog: option '--verbose' doesn't allow an argument\n", 51) == 0);
	/* A usage line only is no option. */
	ck_assert_int_eq(parse("--id", "1", "--connect-to-somewhere none", NULL), OPT_RESULT_BAD);
	ck_assert(strstr(err_text, "unrecognized option") != NULL);
	/* Neither is an option nobody declared, with a prefix of none. */
	ck_assert_int_eq(parse("--id", "1", "--x", NULL), OPT_RESULT_BAD);
}
END_TEST

static const char expected_usage[] =
	"Usage: prog --id N\n"
	"            [options]\n"
	"A test program.\n"
	"\n"
	"Run:\n"
	"  --id N                  the ID\n"
	"  --count N               how many (default 3)\n"
	"  --bytes B               a long help that goes\n"
	"                          on to a second line (default 4Ki)\n"
	"  --offset NS             signed\n"
	"  --ratio R               a fraction\n"
	"Names:\n"
	"  --name NAME             up to 7 bytes\n"
	"  --path PATH             kept as given\n"
	"  --connect-to-somewhere HOST:PORT  the left column is wider than its room\n"
	"  --connect-to-somewhere none  a line of the usage only\n"
	"  --verbose               say more\n"
	"  --colour C              red, green or blue\n"
	"  --kind k@N              custom\n"
	"Other:\n"
	"  --quiet                 log less\n"
	"  --help, --version\n"
	"Environment:\n"
	"  X=1  nothing\n"
	"\n"
	"Example:\n"
	"  prog --id 1\n";

START_TEST(test_table_help)
{
	/* --help wins over a required option missing and over what follows. */
	ck_assert_int_eq(parse("--help", "--bogus", NULL), OPT_RESULT_DONE);
	ck_assert_str_eq(out_text, expected_usage);
	ck_assert_str_eq(err_text, "");
	ck_assert_int_eq(parse("--version", NULL), OPT_RESULT_DONE);
	ck_assert_str_eq(out_text, "prog 9.9\n");
	/* A bad value before --help is reported, as getopt reads in order. */
	ck_assert_int_eq(parse("--count", "x", "--help", NULL), OPT_RESULT_BAD);
	ck_assert_str_eq(out_text, "");
}
END_TEST

START_TEST(test_table_bad_default)
{
	static const struct opt_spec bad[] = {
		OPT_UINT("count", "N", struct t_opts, count, 1, 10, .def = "11", .help = "x"),
	};
	const struct opt_table table = { bad, 1, &topt };
	const struct opt_program prog = { .name = "prog", .version = "1", .synopsis = "",
					  .description = "", .example = "", .tables = &table,
					  .n_tables = 1 };
	char *argv[] = { (char *)"prog", NULL };
	fflush(stderr);
	int saved = dup(2);
	FILE *terr = tmpfile();
	dup2(fileno(terr), 2);
	enum opt_result r = opt_parse(&prog, 1, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	read_back(terr, err_text, sizeof err_text);
	ck_assert_int_eq(r, OPT_RESULT_BAD);
	ck_assert(strstr(err_text, "prog: the default of --count does not parse\n") != NULL);
}
END_TEST

/* The fault options' KIND@N (sourced --stall/--inject, readoutd --shm-inject). */
/* A run's command line (docs/RUNCONTROL.md): the base's fixed options
 * that the run leaves out are put in front; one it changes is refused
 * naming it and the base's value; what is not fixed may change. */
START_TEST(test_run_command_line)
{
	static struct opt_record base, run;
	static char *base_argv[] = { "prog", "--id", "7", "--connect-to-somewhere", "h:80",
				     "--verbose", "--count", "2", NULL };
	const struct opt_table tables[] = {
		{ t_specs, sizeof t_specs / sizeof t_specs[0], &topt },
		{ t_common_specs, sizeof t_common_specs / sizeof t_common_specs[0], &tcommon },
	};
	const struct opt_program prog = { .name = "prog", .tables = tables, .n_tables = 2 };
	ck_assert_int_eq(opt_parse_recorded(&prog, 8, base_argv, &base), OPT_RESULT_OK);
	ck_assert_uint_eq(base.count, 4);

	char *args[] = { "--count=5", "--path", "/run-8" };
	char *argv[16], text[256];
	int n = opt_run_argv(&prog, &base, 3, args, argv, 16, text, sizeof text);
	ck_assert_int_eq(n, 7);
	ck_assert_str_eq(argv[0], "prog");
	ck_assert_str_eq(argv[1], "--id=7");
	ck_assert_str_eq(argv[2], "--connect-to-somewhere=h:80");
	ck_assert_str_eq(argv[3], "--verbose");
	ck_assert_str_eq(argv[4], "--count=5");
	argv[n] = NULL;
	char err[256] = "";
	parse_record = &run;
	memset(&run, 0, sizeof run);
	ck_assert_int_eq(parse(argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], NULL),
			 OPT_RESULT_OK);
	ck_assert(opt_fixed_unchanged(&prog, &base, &run, err, sizeof err));
	ck_assert_uint_eq(topt.id, 7);
	ck_assert_uint_eq(topt.count, 5);
	ck_assert_str_eq(topt.path, "/run-8");

	/* The whole command line again, fixed options unchanged: accepted. */
	char *same[] = { "--id", "7", "--connect-to-somewhere", "h:80", "--count", "9" };
	n = opt_run_argv(&prog, &base, 6, same, argv, 16, text, sizeof text);
	ck_assert_int_eq(n, 8);                 /* prog, --verbose, then the six */
	memset(&run, 0, sizeof run);
	ck_assert_int_eq(parse(argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], argv[7],
			       NULL), OPT_RESULT_OK);
	ck_assert(opt_fixed_unchanged(&prog, &base, &run, err, sizeof err));

	/* A fixed option changed. */
	char *moved[] = { "--connect-to-somewhere=other:81" };
	n = opt_run_argv(&prog, &base, 1, moved, argv, 16, text, sizeof text);
	memset(&run, 0, sizeof run);
	ck_assert_int_eq(parse(argv[1], argv[2], argv[3], NULL), OPT_RESULT_OK);
	ck_assert(!opt_fixed_unchanged(&prog, &base, &run, err, sizeof err));
	ck_assert_str_eq(err, "--connect-to-somewhere is fixed for this daemon's life (h:80); "
			      "restart it to change it");
	parse_record = NULL;

	/* Too little room is said, not overrun. */
	ck_assert_int_eq(opt_run_argv(&prog, &base, 3, args, argv, 3, text, sizeof text), -1);
	ck_assert_int_eq(opt_run_argv(&prog, &base, 3, args, argv, 16, text, 10), -1);
}
END_TEST

START_TEST(test_kind_at)
{
	static const char *const names[] = { "crc", "crcx", "head" };
	size_t k = 99;
	uint64_t n = 99;
	ck_assert(opt_kind_at("crc", names, 3, &k, &n));
	ck_assert_uint_eq(k, 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(opt_kind_at("crcx@17", names, 3, &k, &n));
	ck_assert_uint_eq(k, 1);
	ck_assert_uint_eq(n, 17);
	ck_assert(opt_kind_at("head@18446744073709551615", names, 3, &k, &n));
	ck_assert_uint_eq(n, UINT64_MAX);
	const char *bad[] = { "cr", "crcxx", "head@", "head@x", "head@5x", "head@-1", "head@+1",
			      "head@ 1", "head@18446744073709551616", "", "@5" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(!opt_kind_at(bad[i], names, 3, &k, &n), "'%s' accepted", bad[i]);
}
END_TEST


int main(void)
{
	Suite *s = suite_create("opt");
	TCase *tc = tcase_create("parsers");
	tcase_add_test(tc, test_u64);
	tcase_add_test(tc, test_hostport);
	tcase_add_test(tc, test_id_list);
	tcase_add_test(tc, test_i64);
	tcase_add_test(tc, test_kind_at);
	suite_add_tcase(s, tc);
	TCase *tt = tcase_create("tables");
	tcase_add_test(tt, test_table_kinds);
	tcase_add_test(tt, test_table_defaults);
	tcase_add_test(tt, test_table_errors);
	tcase_add_test(tt, test_table_getopt_errors);
	tcase_add_test(tt, test_table_help);
	tcase_add_test(tt, test_table_bad_default);
	tcase_add_test(tt, test_run_command_line);
	suite_add_tcase(s, tt);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
