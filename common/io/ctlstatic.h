/* The operator's console as files served by the control endpoint
 * (io/ctlhttp, docs/RUNCONTROL.md "The console"): GET / is DIR/index.html,
 * GET /console/NAME is DIR/NAME. NAME is one file name of letters, digits,
 * '.', '_' and '-', not starting with '.', so no request names anything
 * outside DIR (no '/', no "..", no escapes); a file is served only when it
 * is a regular file (not a symbolic link), at most CTLSTATIC_MAX_FILE
 * bytes, of a known type (.html, .js, .css, .svg, .png, .ico, .json,
 * .map), with its Content-Type and a Content-Security-Policy that lets the
 * page reach no address but the hub's. The files of the hub's runs
 * (io/ctlhttp's GET /runs/N/NAME) are read the same way. */
#ifndef ES_IO_CTLSTATIC_H
#define ES_IO_CTLSTATIC_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;

#define CTLSTATIC_MAX_FILE (8u * 1024u * 1024u)
#define CTLSTATIC_PREFIX "/console/"

/* Whether uri (as the request line has it) asks for a console file. */
bool ctlstatic_wanted(const char *uri);

/* The file uri names, into out: its content type in *type and 200, or the
 * HTTP status of the refusal (404, 413, 500) with the reason. */
int ctlstatic_read(const char *dir, const char *uri, struct evbuffer *out, const char **type,
		   char *reason, size_t len);

/* The file at path, into out, as the console's are served: a regular
 * file (not a symbolic link) of a known type by its name's extension, at
 * most CTLSTATIC_MAX_FILE bytes; its content type in *type and 200, or the
 * refusal's status (404, 413, 500) with the reason, which names the file
 * as shown and adds hint to a file that cannot be opened. */
int ctlstatic_read_file(const char *path, const char *shown, const char *hint,
			struct evbuffer *out, const char **type, char *reason, size_t len);

/* The headers every console file is sent with (name, value pairs, NULL
 * ended). */
extern const char *const ctlstatic_headers[];

#endif
