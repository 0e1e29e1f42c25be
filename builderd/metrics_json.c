#include "metrics_json.h"

#include "sys/afile.h"
#include "sys/log.h"
#include "wire/text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *metrics_json_text(const char *s)
{
	size_t n = strlen(s);
	if (text_utf8_valid(s, n))
		return json_stringn(s, n);
	/* Each bad byte becomes the three bytes of U+FFFD. */
	char *buf = malloc(3 * n + 1);
	if (buf == NULL)
		return NULL;
	text_to_utf8(buf, 3 * n + 1, s);
	json_t *v = json_string(buf);
	free(buf);
	return v;
}

void metrics_json_set(json_t *obj, const char *key, json_t *value)
{
	if (value == NULL)
		value = json_null();
	size_t n = strlen(key);
	if (text_utf8_valid(key, n)) {
		json_object_set_new(obj, key, value);
		return;
	}
	char *buf = malloc(3 * n + 1);
	if (buf == NULL) {
		json_decref(value);
		return;
	}
	text_to_utf8(buf, 3 * n + 1, key);
	json_object_set_new(obj, buf, value);
	free(buf);
}

json_t *metrics_json_u64(uint64_t v)
{
	if (v > INT64_MAX)
		return json_real((double)v);
	return json_integer((json_int_t)v);
}

json_t *metrics_json_real(double v, int decimals)
{
	double scale = pow(10.0, decimals);
	double r = round(v * scale) / scale;
	/* jansson refuses NaN and infinities; JSON has no spelling for them. */
	return isfinite(r) ? json_real(r) : json_null();
}

int metrics_json_write(const char *path, const json_t *root, size_t flags)
{
	char *text = json_dumps(root, flags);
	int rc = text == NULL ? -ENOMEM : 0;
	if (rc == 0) {
		size_t len = strlen(text);
		text[len] = '\n';   /* over its NUL: written by length */
		rc = afile_write_all(path, text, len + 1);
	}
	free(text);
	if (rc < 0)
		log_error("Cannot write %s: %s", path, strerror(-rc));
	return rc;
}
