/* Who is in control of a control endpoint (io/ctlhttp, docs/RUNCONTROL.md
 * "One operator in control"): at most one operator, named by the client
 * (1 .. CTLOWNER_NAME_MAX printable ASCII characters), holds control; a
 * state-changing request naming anyone else is refused with both names.
 * Control is taken when free or already one's own, taken over from another
 * only when asked explicitly (logged, counted), and released by its holder.
 * While nobody holds it, every signed request is taken, so a client that
 * never asks for control (daqrun --runs) works as before. The names are
 * the clients' word: control keeps operators who share the run key from
 * colliding, it is no authentication beyond the key's. */
#ifndef ES_IO_CTLOWNER_H
#define ES_IO_CTLOWNER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTLOWNER_NAME_MAX 64u

struct ctlowner {
	bool held;
	char name[CTLOWNER_NAME_MAX + 1];
	uint64_t since_ms;          /* Unix ms, when it was taken */
	char previous[CTLOWNER_NAME_MAX + 1];   /* who held it before, "" */
	uint64_t takes;             /* control taken when free */
	uint64_t takeovers;         /* taken from another holder */
	uint64_t releases;
	uint64_t refused;           /* requests refused for control */
};

/* Whether name (NULL: absent) is an operator's name; false with the reason. */
bool ctlowner_name_ok(const json_t *name, char *reason, size_t len);

/* Control to name (already checked). Refused, false with the reason, when
 * another holds it and take_over is false. */
bool ctlowner_take(struct ctlowner *o, const char *name, bool take_over, uint64_t now_ms,
		   char *reason, size_t len);

/* Releases control if name holds it; false with the reason otherwise. */
bool ctlowner_release(struct ctlowner *o, const char *name, char *reason, size_t len);

/* Whether a state-changing request naming name (NULL: none) may go on:
 * control is free or name holds it; false with the reason (counted). */
bool ctlowner_allows(struct ctlowner *o, const char *name, uint64_t now_ms, char *reason,
		     size_t len);

/* /state's "control": {"operator": NAME or null, "since_unix_ms", "previous",
 * "takes", "takeovers", "releases", "refused"}. */
json_t *ctlowner_json(const struct ctlowner *o);

#endif
