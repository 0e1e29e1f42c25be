/* The run slot of a daemon serving many runs (io/session.h,
 * docs/RUNCONTROL.md): each configure's command line parsed on fresh
 * options with the base's fixed options, checked as the command line is,
 * and the run object made from it; the base's run key and log stay. */
#include "io/session.h"

#include "sys/log.h"
#include "sys/procstat.h"
#include "sys/opt.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOT_MAX_ARGS 256
#define SLOT_MMAP_THRESHOLD (128 * 1024)

struct run_slot {
	const struct daemon_def *def;
	struct event_base *base;
	struct opt_record base_given;
	void *opts;                         /* the run's, def->opts_size bytes */
	struct daemon_options common;       /* the run's parse of the common options */
	void *run;
	uint32_t run_id;
	/* What the run's options point into (OPT_KIND_STRING_REF): its
	 * arguments, the base's fixed options as "--name=value", "--run=N". */
	char args_text[CTL_MAX_ARGS_TEXT + 32];
	char fixed_text[4096];
	char *argv[SLOT_MAX_ARGS + 1];
};

/* The program whose tables point into opts and common. */
static struct opt_program slot_program(const struct daemon_def *def, struct opt_table tables[2],
				       void *opts, struct daemon_options *common)
{
	tables[0] = (struct opt_table){ def->specs, def->n_specs, opts };
	tables[1] = (struct opt_table){ daemon_option_specs, daemon_option_count, common };
	return (struct opt_program){ .name = def->role, .version = ES_VERSION,
				     .synopsis = def->synopsis, .description = def->description,
				     .epilogue = def->epilogue, .example = def->example,
				     .tables = tables, .n_tables = 2 };
}

struct run_slot *run_slot_new(const struct daemon_def *def, struct event_base *base,
			      int base_argc, char **base_argv)
{
	struct run_slot *s = calloc(1, sizeof *s);
	void *scratch = calloc(1, def->opts_size);
	if (s == NULL || scratch == NULL || (s->opts = calloc(1, def->opts_size)) == NULL) {
		free(scratch);
		free(s);
		return NULL;
	}
	s->def = def;
	s->base = base;
	/* A run's large buffers (rings, windows, batches) go back to the kernel
	 * when its run object is destroyed: glibc would otherwise raise its
	 * mmap threshold at the first such free and keep every later run's on
	 * the heap, so the process would grow over its first runs. */
	mallopt(M_MMAP_THRESHOLD, SLOT_MMAP_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, SLOT_MMAP_THRESHOLD);
	/* The base was parsed once already (daemon_main); again here only to
	 * record which fixed options it gave and with what. */
	struct opt_table tables[2];
	struct daemon_options common = { .role = def->role };
	struct opt_program prog = slot_program(def, tables, scratch, &common);
	enum opt_result r = opt_parse_recorded(&prog, base_argc, base_argv, &s->base_given);
	free(scratch);
	if (r != OPT_RESULT_OK) {
		run_slot_free(s);
		errno = EINVAL;
		return NULL;
	}
	return s;
}

void run_slot_free(struct run_slot *s)
{
	if (s == NULL)
		return;
	if (s->run != NULL) {
		s->def->destroy(s->run);
		s->run = NULL;
	}
	free(s->opts);
	free(s);
}

int session_split_args(char *text, char **argv, int cap)
{
	int n = 0;
	if (text[0] == '\0')
		return 0;
	for (char *p = text;; ) {
		if (n == cap)
			return -1;
		argv[n++] = p;
		char *nl = strchr(p, '\n');
		if (nl == NULL)
			return n;
		*nl = '\0';
		p = nl + 1;
	}
}

/* The configure's arguments copied into the slot, "--run=N" last so that
 * the configure's run number is the run's whatever the arguments say. */
static int slot_copy_args(struct run_slot *s, uint32_t run, int argc, char **args, char **out,
			  int cap)
{
	size_t used = 0;
	int n = 0;
	for (int i = 0; i <= argc; i++) {
		char last[24];
		const char *a = i < argc ? args[i] : last;
		if (i == argc)
			snprintf(last, sizeof last, "--run=%u", run);
		size_t len = strlen(a);
		if (n == cap || used + len + 1 > sizeof s->args_text)
			return -1;
		memcpy(s->args_text + used, a, len + 1);
		out[n++] = s->args_text + used;
		used += len + 1;
	}
	return n;
}

/* The first line fd holds, as the refusal's reason. */
static void slot_first_line(int fd, char *err, size_t errlen)
{
	char text[1024];
	ssize_t n = pread(fd, text, sizeof text - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	char *line = text;
	while (*line == '\n')
		line++;
	line[strcspn(line, "\n")] = '\0';
	snprintf(err, errlen, "%s", line[0] != '\0' ? line : "the options were refused");
}

/* Parses and checks the run's command line into s->opts with what it
 * prints on stderr captured: a person reads it in the refusal. */
static bool slot_parse(struct run_slot *s, int argc, char **argv, char *err, size_t errlen)
{
	static struct opt_record given;
	struct opt_table tables[2];
	memset(s->opts, 0, s->def->opts_size);
	s->common = (struct daemon_options){ .role = s->def->role };
	struct opt_program prog = slot_program(s->def, tables, s->opts, &s->common);
	int captured = memfd_create("run-options", MFD_CLOEXEC);
	int saved = dup(2);
	if (captured < 0 || saved < 0) {
		snprintf(err, errlen, "cannot capture the option errors: %s", strerror(errno));
		if (captured >= 0)
			close(captured);
		return false;
	}
	fflush(stderr);
	dup2(captured, 2);
	memset(&given, 0, sizeof given);
	bool ok = opt_parse_recorded(&prog, argc, argv, &given) == OPT_RESULT_OK &&
		  opt_fixed_unchanged(&prog, &s->base_given, &given, err, errlen);
	bool fixed_refused = !ok && err[0] != '\0';
	if (ok && s->def->check != NULL)
		ok = s->def->check(s->opts, &s->common);
	if (ok && s->def->check_listen != NULL)
		ok = s->def->check_listen(s->opts, &s->common);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (!ok && !fixed_refused)
		slot_first_line(captured, err, errlen);
	close(captured);
	return ok;
}

bool run_slot_configure(struct run_slot *s, uint32_t run, int argc, char **args, char *err,
			size_t errlen)
{
	err[0] = '\0';
	if (s->run != NULL) {
		snprintf(err, errlen, "%s is in run %u; stop it first", s->def->role, s->run_id);
		return false;
	}
	char *copied[SLOT_MAX_ARGS];
	int n = slot_copy_args(s, run, argc, args, copied, SLOT_MAX_ARGS);
	if (n < 0) {
		snprintf(err, errlen, "the run's command line is longer than %u bytes or %d arguments",
			 CTL_MAX_ARGS_TEXT - 1, SLOT_MAX_ARGS);
		return false;
	}
	int total = opt_run_argv(&(struct opt_program){ .name = s->def->role,
		.tables = (struct opt_table[]){ { s->def->specs, s->def->n_specs, s->opts },
						{ daemon_option_specs, daemon_option_count, &s->common } },
		.n_tables = 2 }, &s->base_given, n, copied, s->argv, SLOT_MAX_ARGS, s->fixed_text,
		sizeof s->fixed_text);
	if (total < 0) {
		snprintf(err, errlen, "the run's command line with the fixed options does not fit");
		return false;
	}
	s->argv[total] = NULL;
	if (!slot_parse(s, total, s->argv, err, errlen))
		return false;
	procstat_mark_run_start();
	s->run = s->def->create(s->base, s->opts);
	if (s->run == NULL) {
		snprintf(err, errlen, "%s could not make run %u (its log says why)", s->def->role,
			 run);
		return false;
	}
	s->run_id = run;
	return true;
}

void *run_slot_object(const struct run_slot *s)
{
	return s->run;
}

uint32_t run_slot_run(const struct run_slot *s)
{
	return s->run != NULL ? s->run_id : 0;
}

void run_slot_stop(struct run_slot *s, const char *why)
{
	if (s->run != NULL)
		s->def->stop(s->run, why);
}

int run_slot_finish(struct run_slot *s)
{
	if (s->run == NULL)
		return -1;
	int status = s->def->exit_status(s->run);
	s->def->destroy(s->run);
	s->run = NULL;
	s->run_id = 0;
	/* What the run freed in the middle of the heap goes back too. */
	malloc_trim(0);
	return status;
}

void session_find_arg(const char *text, const char *name, char *out, size_t len)
{
	size_t name_len = strlen(name);
	out[0] = '\0';
	for (const char *a = text; a != NULL && *a != '\0';) {
		const char *end = strchr(a, '\n');
		size_t n = end ? (size_t)(end - a) : strlen(a);
		if (n > name_len && strncmp(a, name, name_len) == 0 && a[name_len] == '=') {
			snprintf(out, len, "%.*s", (int)(n - name_len - 1), a + name_len + 1);
		} else if (n == name_len && strncmp(a, name, n) == 0 && end != NULL) {
			const char *v = end + 1, *v_end = strchr(v, '\n');
			snprintf(out, len, "%.*s", (int)(v_end ? (size_t)(v_end - v) : strlen(v)), v);
		}
		a = end ? end + 1 : NULL;
	}
}
