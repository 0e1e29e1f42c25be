#include "io/ctlstatic.h"

#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTLSTATIC_NAME_MAX 128u

static const struct {
	const char *ext;
	const char *type;
} ctlstatic_types[] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".svg", "image/svg+xml" },
	{ ".png", "image/png" },
	{ ".ico", "image/x-icon" },
	{ ".json", "application/json" },
	{ ".map", "application/json" },
};

/* The page may load and ask nothing but the hub (its own origin); its
 * scripts and styles are its files. */
const char *const ctlstatic_headers[] = {
	"Content-Security-Policy",
	"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
	"img-src 'self' data:; connect-src 'self'; form-action 'none'; "
	"frame-ancestors 'none'; base-uri 'none'",
	"X-Content-Type-Options", "nosniff",
	"Cache-Control", "no-cache",
	"Referrer-Policy", "no-referrer",
	NULL,
};

bool ctlstatic_wanted(const char *uri)
{
	return strcmp(uri, "/") == 0 ||
	       strncmp(uri, CTLSTATIC_PREFIX, sizeof CTLSTATIC_PREFIX - 1) == 0;
}

/* The file name uri asks for into name, or false. */
static bool ctlstatic_name(const char *uri, char name[CTLSTATIC_NAME_MAX + 1])
{
	if (strcmp(uri, "/") == 0) {
		snprintf(name, CTLSTATIC_NAME_MAX + 1, "index.html");
		return true;
	}
	const char *p = uri + sizeof CTLSTATIC_PREFIX - 1;
	size_t n = strlen(p);
	if (n == 0 || n > CTLSTATIC_NAME_MAX || p[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == '_' || c == '-';
		if (!ok)
			return false;
	}
	memcpy(name, p, n + 1);
	return true;
}

static const char *ctlstatic_type(const char *name)
{
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot != NULL && i < sizeof ctlstatic_types / sizeof ctlstatic_types[0]; i++)
		if (strcmp(dot, ctlstatic_types[i].ext) == 0)
			return ctlstatic_types[i].type;
	return NULL;
}

int ctlstatic_read_file(const char *path, const char *shown, const char *hint,
			struct evbuffer *out, const char **type, char *reason, size_t len)
{
	const char *slash = strrchr(path, '/');
	if ((*type = ctlstatic_type(slash != NULL ? slash + 1 : path)) == NULL) {
		snprintf(reason, len, "%s is of no type served", shown);
		return 404;
	}
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(reason, len, "%s: %s%s", shown, strerror(errno), hint);
		return 404;
	}
	struct stat st;
	int status = 200;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(reason, len, "%s is not a regular file", shown);
		status = 404;
	} else if ((unsigned long long)st.st_size > CTLSTATIC_MAX_FILE) {
		snprintf(reason, len, "%s is %lld bytes; at most %u are served", shown,
			 (long long)st.st_size, CTLSTATIC_MAX_FILE);
		status = 413;
	} else {
		size_t left = (size_t)st.st_size;
		while (left > 0) {
			int n = evbuffer_read(out, fd, (int)left);
			if (n <= 0)
				break;
			left -= (size_t)n;
		}
		if (left > 0) {
			snprintf(reason, len, "%s cannot be read whole", shown);
			evbuffer_drain(out, evbuffer_get_length(out));
			status = 500;
		}
	}
	close(fd);
	return status;
}

int ctlstatic_read(const char *dir, const char *uri, struct evbuffer *out, const char **type,
		   char *reason, size_t len)
{
	char name[CTLSTATIC_NAME_MAX + 1], path[4096 + CTLSTATIC_NAME_MAX], shown[32 + CTLSTATIC_NAME_MAX];
	if (!ctlstatic_name(uri, name) || ctlstatic_type(name) == NULL) {
		snprintf(reason, len, "no such console file; the console is GET / and its files "
				      "GET %sNAME (letters, digits, '.', '_', '-')", CTLSTATIC_PREFIX);
		return 404;
	}
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(shown, sizeof shown, "console file %s", name);
	return ctlstatic_read_file(path, shown, strcmp(name, "index.html") == 0
				   ? " (the console is built by make into build/console; builderd "
				     "--console-dir)" : "", out, type, reason, len);
}
