#include "io/ctlowner.h"

#include "sys/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

bool ctlowner_name_ok(const json_t *name, char *reason, size_t len)
{
	const char *s = json_string_value(name);
	if (s == NULL) {
		snprintf(reason, len, "operator: the request names no operator (\"operator\": "
				      "\"NAME\" in its body)");
		return false;
	}
	size_t n = json_string_length(name);
	if (n == 0 || n > CTLOWNER_NAME_MAX) {
		snprintf(reason, len, "operator: a name of 1 to %u characters is needed, not %zu",
			 CTLOWNER_NAME_MAX, n);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c > 0x7e) {
			snprintf(reason, len, "operator: character %zu is not printable ASCII", i + 1);
			return false;
		}
	}
	return true;
}

/* "NAME (in control for S s)" of the holder. */
static void ctlowner_holder(const struct ctlowner *o, uint64_t now_ms, char *out, size_t len)
{
	uint64_t held_s = now_ms > o->since_ms ? (now_ms - o->since_ms) / 1000u : 0;
	snprintf(out, len, "'%s' (in control for %" PRIu64 " s)", o->name, held_s);
}

bool ctlowner_take(struct ctlowner *o, const char *name, bool take_over, uint64_t now_ms,
		   char *reason, size_t len)
{
	if (o->held && strcmp(o->name, name) == 0)
		return true;
	if (o->held && !take_over) {
		char holder[CTLOWNER_NAME_MAX + 48];
		ctlowner_holder(o, now_ms, holder, sizeof holder);
		snprintf(reason, len, "control is held by %s; '%s' may take it over explicitly",
			 holder, name);
		return false;
	}
	if (o->held) {
		log_warn("Control taken over by '%s' from '%s'", name, o->name);
		o->takeovers++;
		snprintf(o->previous, sizeof o->previous, "%s", o->name);
	} else {
		log_warn("Control taken by '%s'", name);
		o->takes++;
	}
	o->held = true;
	snprintf(o->name, sizeof o->name, "%s", name);
	o->since_ms = now_ms;
	return true;
}

bool ctlowner_release(struct ctlowner *o, const char *name, char *reason, size_t len)
{
	if (!o->held) {
		snprintf(reason, len, "control is not held by anyone; '%s' has none to release", name);
		return false;
	}
	if (strcmp(o->name, name) != 0) {
		snprintf(reason, len, "control is held by '%s', not '%s'; only its holder releases it",
			 o->name, name);
		return false;
	}
	log_warn("Control released by '%s'", name);
	o->releases++;
	o->held = false;
	snprintf(o->previous, sizeof o->previous, "%s", o->name);
	o->name[0] = '\0';
	o->since_ms = 0;
	return true;
}

bool ctlowner_allows(struct ctlowner *o, const char *name, uint64_t now_ms, char *reason,
		     size_t len)
{
	if (!o->held || (name != NULL && strcmp(o->name, name) == 0))
		return true;
	char holder[CTLOWNER_NAME_MAX + 48];
	ctlowner_holder(o, now_ms, holder, sizeof holder);
	o->refused++;
	if (name == NULL)
		snprintf(reason, len, "control is held by %s; this request names no operator",
			 holder);
	else
		snprintf(reason, len, "control is held by %s, not '%s'; take control over "
				      "explicitly first", holder, name);
	return false;
}

json_t *ctlowner_json(const struct ctlowner *o)
{
	return json_pack("{s:o, s:o, s:s, s:I, s:I, s:I, s:I}",
			 "operator", o->held ? json_string(o->name) : json_null(),
			 "since_unix_ms", o->held ? json_integer((json_int_t)o->since_ms) : json_null(),
			 "previous", o->previous, "takes", (json_int_t)o->takes,
			 "takeovers", (json_int_t)o->takeovers, "releases", (json_int_t)o->releases,
			 "refused", (json_int_t)o->refused);
}
