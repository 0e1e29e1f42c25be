/* Writes the parts of the documents that the code defines, as Markdown, so
 * that they are generated rather than copied and cannot drift:
 *
 *   docgen version              the protocol version line of docs/PROTOCOL.md
 *   docgen fields TYPE [TYPE]   a message's key table, from the codec's field
 *                               table (TYPEs sharing one table: "stats end")
 *   docgen equations            README's table of the books' equations
 *   docgen equations metrics    docs/METRICS.md's, with each side in words
 *   docgen equations gone       docs/METRICS.md's of a peer lost before its report
 *
 * scripts/gendocs.py puts the output between the document's
 * "<!-- generated: ARGS -->" and "<!-- end -->" lines (make docs) and fails
 * when the committed text differs (make test). */
#include "core/acct.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int docgen_type(const char *name, enum ctl_type *type)
{
	for (int t = CTL_HELLO; t <= CTL_SHUTDOWN; t++) {
		if (strcmp(ctl_type_name((enum ctl_type)t), name) == 0) {
			*type = (enum ctl_type)t;
			return 0;
		}
	}
	fprintf(stderr, "docgen: no message type '%s'\n", name);
	return -1;
}

static int docgen_fields(int argc, char **argv)
{
	enum ctl_type types[2];
	if (argc < 1 || argc > 2) {
		fprintf(stderr, "docgen: fields takes one or two message types\n");
		return 2;
	}
	for (int i = 0; i < argc; i++)
		if (docgen_type(argv[i], &types[i]) != 0)
			return 2;
	/* Types named together must share their table, or one row would lie. */
	if (argc == 2 && ctl_field_count(types[0]) != ctl_field_count(types[1])) {
		fprintf(stderr, "docgen: %s and %s do not share a field table\n", argv[0], argv[1]);
		return 2;
	}
	printf("| key | msgpack type | range / size | field |\n");
	printf("|---|---|---|---|\n");
	if (argc == 2)
		printf("| `type` | str | `\"%s\"` or `\"%s\"` | |\n", argv[0], argv[1]);
	else
		printf("| `type` | str | `\"%s\"` | |\n", argv[0]);
	struct ctl_field_doc d, d2;
	for (size_t i = 0; ctl_field_describe(types[0], i, &d); i++) {
		if (argc == 2 && (!ctl_field_describe(types[1], i, &d2) || strcmp(d.key, d2.key) != 0)) {
			fprintf(stderr, "docgen: %s and %s differ at key %zu\n", argv[0], argv[1], i);
			return 2;
		}
		printf("| `%s` | %s | %s | %s |\n", d.key, d.type, d.range, d.doc);
	}
	return 0;
}

/* An equation's name as metrics.json spells it, with the numbers as
 * letters: "source %u" becomes "source N", "reader %u" "reader R". */
static void docgen_equation_name(const char *fmt, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = fmt; *p != '\0' && o + 1 < cap; p++) {
		if (p[0] == '%' && p[1] == 'u') {
			const char *word = p;
			while (word > fmt && word[-1] == ' ')
				word--;
			while (word > fmt && word[-1] != ' ')
				word--;
			out[o++] = strncmp(word, "reader", 6) == 0 ? 'R' : 'N';
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

/* which: NULL README's table of every kind; "metrics" or "gone" the kinds
 * of a run without (with) a lost peer, with their sides. */
static int docgen_equations(const char *which)
{
	char name[160];
	if (which == NULL)
		printf("| equation (as `metrics.json` names it; N a source, R a reader) | counters from |\n"
		       "|---|---|\n");
	else if (strcmp(which, "metrics") == 0 || strcmp(which, "gone") == 0)
		printf("| name | lhs | rhs |\n|---|---|---|\n");
	else {
		fprintf(stderr, "docgen: equations takes 'metrics' or 'gone', not '%s'\n", which);
		return 2;
	}
	for (int k = 0; k < ACCT_KIND_COUNT; k++) {
		const struct acct_kind_doc *d = acct_kind_describe((enum acct_kind)k);
		docgen_equation_name(d->format, name, sizeof name);
		bool gone = strstr(d->format, "(gone)") != NULL;
		if (which == NULL)
			printf("| %s | %s |\n", name, d->from);
		else if (gone == (strcmp(which, "gone") == 0))
			printf("| `%s` | %s | %s |\n", name, d->lhs, d->rhs);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "version") == 0 && argc == 2) {
		printf("This is version %u of the protocol (`CTL_PROTOCOL_VERSION`); every peer's\n"
		       "`hello` names it and every listener refuses any other.\n",
		       CTL_PROTOCOL_VERSION);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "fields") == 0)
		return docgen_fields(argc - 2, argv + 2);
	if ((argc == 2 || argc == 3) && strcmp(argv[1], "equations") == 0)
		return docgen_equations(argc == 3 ? argv[2] : NULL);
	fprintf(stderr, "usage: docgen version | fields TYPE [TYPE] | equations [metrics|gone]\n");
	return 2;
}
