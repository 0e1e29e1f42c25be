/* sd_notify(3) for Type=notify units; see notify.h. */
#include "sys/notify.h"

#include "sys/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

/* "READY=1\nSTATUS=" and the status. */
#define NOTIFY_MSG_MAX (NOTIFY_STATUS_MAX + 32)

static bool notify_failed_once;

/* One datagram; sd_notify is 0 without $NOTIFY_SOCKET and negative when a
 * set one cannot be reached (its manager gone, a path too long). */
static void notify_send(const char *msg)
{
	int rc = sd_notify(0, msg);
	if (rc < 0 && !notify_failed_once) {
		notify_failed_once = true;
		const char *where = getenv("NOTIFY_SOCKET");
		log_warn("Cannot notify the service manager at %s: %s; carrying on without",
			 where != NULL ? where : "$NOTIFY_SOCKET", strerror(-rc));
	}
}

/* Appends text to msg (of NOTIFY_MSG_MAX) at len as one protocol line. */
static void notify_put_status(char *msg, size_t len, const char *text)
{
	size_t n = strlen(text);
	if (n > NOTIFY_STATUS_MAX) {
		n = NOTIFY_STATUS_MAX;
		while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
			n--;        /* cut before a UTF-8 character, not inside it */
	}
	for (size_t i = 0; i < n && len + 1 < NOTIFY_MSG_MAX; i++) {
		unsigned char c = (unsigned char)text[i];
		msg[len++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	msg[len] = '\0';
}

void notify_ready(const char *status)
{
	char msg[NOTIFY_MSG_MAX] = "READY=1";
	if (status != NULL && status[0] != '\0') {
		size_t len = strlen(msg);
		memcpy(msg + len, "\nSTATUS=", sizeof "\nSTATUS=");
		notify_put_status(msg, len + strlen("\nSTATUS="), status);
	}
	notify_send(msg);
}

void notify_status(const char *fmt, ...)
{
	char text[2 * NOTIFY_STATUS_MAX];   /* cut by notify_put_status */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	char msg[NOTIFY_MSG_MAX] = "STATUS=";
	notify_put_status(msg, strlen(msg), text);
	notify_send(msg);
}

void notify_stopping(void)
{
	notify_send("STOPPING=1");
}
