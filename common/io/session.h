/* A daemon that serves runs (docs/RUNCONTROL.md): the process lives across
 * runs, and each run is a fresh run object made from the run's options on
 * the same event base and destroyed when the run is over. This module holds
 * the run slot both sides of a session share: the base command line, the
 * current run object and the arguments of the run it was made from. */
#ifndef ES_IO_SESSION_H
#define ES_IO_SESSION_H

#include "io/daemon.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* ---- The run slot --------------------------------------------------------
 * The daemon's current run object, made from its base command line's fixed
 * options followed by a configure's arguments. */
struct run_slot;

/* def and base_argv (the process's argv, kept for its life) stay valid as
 * long as the slot. NULL when out of memory. */
struct run_slot *run_slot_new(const struct daemon_def *def, struct event_base *base,
			      int base_argc, char **base_argv);
void run_slot_free(struct run_slot *s);   /* stops and destroys a run object left */

/* Parses, on fresh options (every default), the base's fixed options then
 * args (count of them) then "--run=RUN" (the configure's run number is the
 * run's whatever args say), checks them as the command line would be, and
 * makes the run object. false, with the reason in err (what the command
 * line would have printed, one line), when an option is unknown or bad, a
 * fixed option differs from the base's, the checks refuse, a run object
 * exists already, or create() failed. */
bool run_slot_configure(struct run_slot *s, uint32_t run, int argc, char **args, char *err,
			size_t errlen);

/* The run object (NULL with none), its run number (0 with none). */
void *run_slot_object(const struct run_slot *s);
uint32_t run_slot_run(const struct run_slot *s);

/* Asks the run object to stop as SIGTERM would (nothing with none). */
void run_slot_stop(struct run_slot *s, const char *why);

/* The run object's run is over (its loop was exited): its exit status,
 * then it is destroyed. -1 with no run object. */
int run_slot_finish(struct run_slot *s);

/* Splits a configure's args text ('\n' between arguments) in place into
 * argv (capacity cap); the count, or -1 when there are more than cap. */
int session_split_args(char *text, char **argv, int cap);

/* The value of option name ("--out") in a configure's args text, as
 * "--out=V" or "--out" "V" (the last one given); "" without it. */
void session_find_arg(const char *text, const char *name, char *out, size_t len);

/* ---- The peer's session ---------------------------------------------------
 * The whole of a serving peer's main() after its options are parsed (a
 * daemon started with --session HOST:PORT): opens its listeners once
 * (def->prepare), joins the hub's session port (greets as role/id with
 * channel "session" and run 0), then makes and ends a run object at each
 * configure until shutdown. The process's exit status: 0 after a shutdown
 * or a signal, 1 when the hub is unreachable or its link is lost. */
int session_peer_main(const struct daemon_def *def, const struct daemon_options *d,
		      struct event_base *base, int argc, char **argv);

#endif
