/* Logging shared by every daemon: one line per message on stderr,
 * "<UTC time> <role>[<id>] <LEVEL> message". Messages are capitalised, have no
 * final period and name the object they are about (run, source, peer). */
#ifndef ES_SYS_LOG_H
#define ES_SYS_LOG_H

#include <stdarg.h>

/* NOTE: what a quiet daemon (--quiet) still says that is not a problem:
 * where it runs (a batch system's job step). */
enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_NOTE, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

/* Sets the prefix of every line and the lowest level printed. */
void log_init(const char *role, int id, enum log_level min_level);

/* True when a message of this level would be printed; lets callers skip
 * formatting work for suppressed debug messages. */
int log_enabled(enum log_level level);

/* Prints one message. Use the macros below. Control bytes and bytes that
 * are not well-formed UTF-8 in the formatted message are written as \xNN
 * (text_log_escape), so a peer's string quoted in it cannot forge a line. */
void log_write(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_debug(...) do { if (log_enabled(LOG_LEVEL_DEBUG)) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...)  log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_note(...)  log_write(LOG_LEVEL_NOTE, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)

#endif
