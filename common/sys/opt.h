/* Option parsing helpers: every bad value is reported with the flag's name,
 * what was expected and what was given, so a daemon's usage errors read
 * "--rate: expected an integer from 0 to 100000000, got 'fast'". */
#ifndef ES_SYS_OPT_H
#define ES_SYS_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Unsigned integer in [min, max]; accepts k/M/G suffixes (x1000) for
 * counts and Ki/Mi suffixes (x1024) for sizes. */
bool opt_u64(const char *flag, const char *arg, uint64_t min, uint64_t max, uint64_t *out);
bool opt_u32(const char *flag, const char *arg, uint32_t min, uint32_t max, uint32_t *out);
bool opt_i64(const char *flag, const char *arg, int64_t *out);

/* HOST:PORT (host may be a name, IPv4, or [IPv6]); port 0 allowed when
 * allow_zero. */
bool opt_hostport(const char *flag, const char *arg, char *host, size_t host_len,
		  uint16_t *port, bool allow_zero);

/* Comma list of IDs and ranges ("0,1,4-7") into ids (capacity cap), each
 * below limit, no repeats. */
bool opt_id_list(const char *flag, const char *arg, uint16_t *ids, size_t cap, size_t *count,
		 uint32_t limit);

/* KIND or KIND@N, KIND one of names[0..count): *kind its index, *after N
 * (0 without "@N"). False for another KIND, an N that is not decimal
 * digits or does not fit 64 bits. */
bool opt_kind_at(const char *arg, const char *const *names, size_t count, size_t *kind,
		 uint64_t *after);

/* Reports a usage error (flag and message) on stderr. */
void opt_error(const char *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Options declared once ---------------------------------------------
 * A daemon declares each option once, in a table of struct opt_spec (name,
 * kind, range, default, help) whose entries point at the fields of its
 * options struct; getopt's table, the parsing, the range errors and the
 * --help text (and so the man page) all come from it, the way the control
 * codec's field tables drive its encoder and decoder. */

enum opt_kind {
	OPT_KIND_UINT,          /* unsigned integer in [min, max], as opt_u64; field of 1, 2, 4 or 8 bytes */
	OPT_KIND_INT,           /* signed integer, as opt_i64; int64_t field */
	OPT_KIND_DOUBLE,        /* a number in [dmin, dmax]; double field */
	OPT_KIND_STRING,        /* copied into a char array of `size` bytes */
	OPT_KIND_STRING_REF,    /* const char * field pointing at the argument */
	OPT_KIND_HOSTPORT,      /* HOST:PORT into a char array and the uint16_t at aux;
				   port 0 allowed when min is 0 */
	OPT_KIND_FLAG,          /* no argument; sets a bool field */
	OPT_KIND_CHOICE,        /* one of choices[] (NULL-terminated); its index into an int field */
	OPT_KIND_CUSTOM,        /* parse(flag, arg, opts) decides, reporting its own error */
	OPT_KIND_HELP,          /* prints the usage on stdout and exits 0 */
	OPT_KIND_VERSION,       /* prints "NAME VERSION" on stdout and exits 0 */
	OPT_KIND_NOTE,          /* a usage line only (label and help), no option */
};

struct opt_spec {
	const char *name;       /* the long name without "--" */
	const char *arg;        /* the argument in the usage ("HOST:PORT"); NULL for a flag */
	enum opt_kind kind;
	size_t offset;          /* of the field in the table's options struct */
	size_t size;            /* of the field; the capacity of a STRING/HOSTPORT host */
	size_t aux;             /* HOSTPORT: offset of the port */
	uint64_t min, max;      /* UINT range; HOSTPORT: min 0 allows port 0 */
	double dmin, dmax;      /* DOUBLE range */
	const char *const *choices;
	bool (*parse)(const char *flag, const char *arg, void *opts);
	const char *def;        /* default, parsed like an argument before the command line;
				   "{default}" in help shows it. NULL: the field's zero */
	bool required;
	/* Fixed for the process's life: a daemon serving many runs refuses a
	 * run's command line that changes it (docs/RUNCONTROL.md). */
	bool fixed;
	const char *group;      /* a heading ("Run") printed before this entry */
	const char *label;      /* the usage's left column when not "--name ARG" */
	const char *help;       /* '\n' starts a continuation line; NULL: not in the usage */
};

/* Entry makers: T is the options struct, F the field. Further members
 * (.def, .required, .group, ...) follow as designated initialisers. */
#define OPT_UINT(N, A, T, F, MIN, MAX, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_UINT, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), .min = MIN, .max = MAX, __VA_ARGS__ }
#define OPT_INT(N, A, T, F, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_INT, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), __VA_ARGS__ }
#define OPT_DOUBLE(N, A, T, F, MIN, MAX, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_DOUBLE, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), .dmin = MIN, .dmax = MAX, __VA_ARGS__ }
#define OPT_STRING(N, A, T, F, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_STRING, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), __VA_ARGS__ }
#define OPT_STRING_REF(N, A, T, F, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_STRING_REF, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), __VA_ARGS__ }
#define OPT_HOSTPORT(N, A, T, HOST, PORT, MIN_PORT, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_HOSTPORT, .offset = offsetof(T, HOST), \
	  .size = sizeof(((T *)0)->HOST), .aux = offsetof(T, PORT), .min = MIN_PORT, __VA_ARGS__ }
#define OPT_FLAG(N, T, F, ...) \
	{ .name = N, .kind = OPT_KIND_FLAG, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), __VA_ARGS__ }
#define OPT_CHOICE(N, A, T, F, CHOICES, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_CHOICE, .offset = offsetof(T, F), \
	  .size = sizeof(((T *)0)->F), .choices = CHOICES, __VA_ARGS__ }
#define OPT_CUSTOM(N, A, FN, ...) \
	{ .name = N, .arg = A, .kind = OPT_KIND_CUSTOM, .parse = FN, __VA_ARGS__ }
#define OPT_NOTE(LABEL, ...) \
	{ .kind = OPT_KIND_NOTE, .label = LABEL, __VA_ARGS__ }

/* One table and the options struct its entries point into. */
struct opt_table {
	const struct opt_spec *specs;
	size_t count;
	void *opts;
};

/* A program's options: its tables in usage order and the prose around them. */
struct opt_program {
	const char *name;               /* "sourced": messages and --version */
	const char *version;
	const char *synopsis;           /* after "Usage: "; '\n' between lines */
	const char *description;        /* the paragraph under it */
	const char *epilogue;           /* printed after the options (NULL: none) */
	const char *example;            /* under "Example:" */
	const struct opt_table *tables;
	size_t n_tables;
};

#define OPT_MAX_SPECS 128       /* entries of all a program's tables together */

/* Writes the usage text: synopsis, description, each group of entries with
 * its help in a column, the epilogue and the example. */
void opt_usage(const struct opt_program *p, FILE *out);

enum opt_result {
	OPT_RESULT_OK,          /* parsed: go on */
	OPT_RESULT_BAD,         /* a usage error, reported on stderr: exit 2 */
	OPT_RESULT_DONE,        /* --help or --version printed on stdout: exit 0 */
};

/* Applies every default, then parses argv. BAD, with the reason on stderr,
 * on an unknown option or a missing argument (getopt's message and the
 * usage), a bad value (naming the flag), an argument left over, or a
 * required option not given. */
enum opt_result opt_parse(const struct opt_program *p, int argc, char **argv);

/* What a parse was given: each option's arguments in command-line order
 * (a flag's is ""), pointing into its argv. */
#define OPT_RECORD_MAX 256u
struct opt_record {
	size_t count;
	struct {
		uint16_t spec;          /* the entry's index in all the tables together */
		const char *arg;
	} given[OPT_RECORD_MAX];
};

/* opt_parse(), recording what it was given in *rec (BAD when more than
 * OPT_RECORD_MAX options are given). */
enum opt_result opt_parse_recorded(const struct opt_program *p, int argc, char **argv,
				   struct opt_record *rec);

/* ---- A run's command line (docs/RUNCONTROL.md) ---------------------------
 * A daemon serving many runs parses each run's command line on fresh
 * options: its own name, every fixed option of the base (the process's
 * command line, recorded in base) that the run's args do not give, as
 * "--name=value" written into text (capacity textcap), then args. The
 * count of out's entries (at most cap), or -1 when they do not fit. */
int opt_run_argv(const struct opt_program *p, const struct opt_record *base, int argc,
		 char **args, char **out, int cap, char *text, size_t textcap);

/* After the run's command line is parsed (recorded in run): true when
 * every fixed option it was given has the base's arguments; else false
 * with "--listen is fixed for this daemon's life (127.0.0.1:7100); restart
 * it to change it" in err. */
bool opt_fixed_unchanged(const struct opt_program *p, const struct opt_record *base,
			 const struct opt_record *run, char *err, size_t errlen);

#endif
