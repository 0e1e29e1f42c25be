/* The event manager of a run with several builders (docs/BUILDERS.md): it
 * hands the run's event IDs out in contiguous batches, each batch to one
 * builder, and keeps the books of what every builder was given and has
 * finished. Pure: time is an argument, no I/O, and nothing is allocated
 * after evm_create().
 *
 * Batches. Batch k holds the IDs of [k x batch, (k + 1) x batch) that lie
 * in the run, so only the first and the last may be shorter. Batches are
 * assigned in ID order, each exactly once, and each assignment is a record
 * (first, count, builder) that the hub publishes to every reader and
 * builder. Aligned batches make the static formula and the manager's
 * choice two answers to the same question, and let a table of the live
 * batches be indexed by event_id / batch, with no search.
 *
 * Tokens. A builder joins with its slots (how many events it can hold at
 * once) and then reports, in every TOKEN, the running total of its IDs it
 * has decided (recorded, expired, or given up as never observed): each
 * decided ID frees one slot. A total rather than an increment, so that a
 * report that goes backwards or claims more than the builder was given is
 * caught by name. Its tokens are slots - in flight, in flight = assigned -
 * decided: a builder is never given more events than it has slots. A
 * builder may report fewer than it decided, never more: a builder whose
 * core keeps a window of consecutive IDs reports those below its lowest
 * undecided one, so its tokens are the room left in that window and no
 * assignment can make the window slide over an incomplete event.
 *
 * Choice. EVM_MANAGER: round-robin over the builders that are free. A
 * builder goes busy when an assignment leaves it below low_water tokens and
 * is free again only once it holds more than high_water; between the two
 * marks it keeps its state, so a builder whose tokens hover around one mark
 * does not flap between taking batches and being skipped. low_water >=
 * batch, so a free builder always has the tokens for a whole batch.
 * EVM_STATIC: batch k goes to builder k mod M, i.e. event_id / batch mod M
 * (evm_static_builder()), and waits until that builder has the tokens,
 * whatever the others hold: the comparison and the oracle of the tests.
 *
 * Window. At most window_batches batches are live (assigned and not yet
 * retired) at once; the next waits for the oldest to retire. The live IDs
 * are [retired_below, assigned_end). The oldest live batch retires once its
 * builder's TOKEN says every one of its IDs below the batch's end is decided
 * (decided_below), or once it is lost with its builder. So every ID below
 * retired_below has been decided by its builder (or lost with a dead one):
 * a fragment of it can only be late or a duplicate there, and a reader that
 * still gets one may count it late without asking anyone. That is why
 * evm_owner() answers for the live IDs alone, and why a reader's table
 * (core/route.h) of window_batches entries is enough: IDs at or past
 * assigned_end are not assigned yet (the reader holds them), and the live
 * ones always fit.
 *
 * A dead builder (evm_dead()) is given no further events by the manager; its
 * live batches not wholly decided are lost, and the events it held are its
 * loss bucket. Static routing keeps the formula: a dead builder's later
 * batches are still assigned to it, and lost at once.
 *
 * Memory, all allocated by evm_create(): about 120 bytes + 64 bytes per
 * builder + 4 bytes per window batch (evm_memory_bytes()), e.g. 17 KiB for
 * 16 builders and a window of 4096 batches. */
#ifndef ES_CORE_EVM_H
#define ES_CORE_EVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVM_MAX_BUILDERS 256u
#define EVM_MAX_BATCH (1u << 20)
#define EVM_MAX_WINDOW_BATCHES (1u << 20)

/* What the hub, every reader and every builder agree on (the ROUTING
 * message of docs/BUILDERS.md): how the run's IDs are cut into batches and
 * how many of them may be live. */
struct evm_plan {
	uint32_t builders;        /* M: builder ids 0 .. M-1, 1 .. EVM_MAX_BUILDERS */
	uint64_t first_event;     /* lowest event ID of the run */
	uint64_t events;          /* IDs of the run, >= 1; first_event + events + batch fits in 64 bits */
	uint32_t batch;           /* IDs per batch, 1 .. EVM_MAX_BATCH */
	uint32_t window_batches;  /* live batches at most, 1 .. EVM_MAX_WINDOW_BATCHES */
};

/* The plan is usable: every field in its range. */
bool evm_plan_valid(const struct evm_plan *p);

/* The IDs of batch k: [first, first + count); count 0 outside the run. */
void evm_plan_batch(const struct evm_plan *p, uint64_t k, uint64_t *first, uint32_t *count);

/* The static formula: builder (event_id / batch) mod builders. */
uint32_t evm_static_builder(uint64_t event_id, uint32_t batch, uint32_t builders);

enum evm_mode {
	EVM_MANAGER,   /* round-robin over free builders with tokens */
	EVM_STATIC,    /* event_id / batch mod M, waiting for that builder's tokens */
};

/* "manager", "static". */
const char *evm_mode_name(enum evm_mode mode);

struct evm_config {
	struct evm_plan plan;
	enum evm_mode mode;
	uint32_t low_water;       /* busy below this many tokens: batch .. high_water - 1 */
	uint32_t high_water;      /* free again above this many; every builder's slots exceed it */
	/* Manager mode: a builder holds at most what it decides in this long
	 * at the pace its tokens show (never less than low_water + batch,
	 * never more than its slots), so a slow builder with a large window
	 * is not handed a backlog that keeps the run waiting for it at its
	 * end; a builder fed over L rails (evm_set_lanes) holds L times this,
	 * and at least low_water + L batches. 0: its slots alone. */
	uint64_t backlog_ns;
};

/* The pace of a builder is measured over at least this long between tokens. */
#define EVM_PACE_INTERVAL_NS 20000000u

/* One assignment, as published. */
struct evm_assignment {
	uint64_t first;           /* first event ID */
	uint32_t count;           /* IDs first .. first + count - 1 */
	uint32_t builder;
};

/* What evm_next() did. */
enum evm_next {
	EVM_ASSIGNED,      /* *out is the new record: publish it */
	EVM_WAIT_TOKENS,   /* manager: every live builder is busy or has not joined;
			    * static: the next batch's builder lacks the tokens or has not joined */
	EVM_WAIT_WINDOW,   /* window_batches batches are live: the oldest must retire first */
	EVM_NO_BUILDERS,   /* manager: every builder is dead, nothing can be assigned */
	EVM_ALL_ASSIGNED,  /* every ID of the run has been assigned */
};

/* "assigned", "waiting for tokens", "waiting for the window", "no builders",
 * "all assigned". */
const char *evm_next_name(enum evm_next what);

/* What evm_owner() knows of an ID. */
enum evm_lookup {
	EVM_OWNED,         /* live: *out is the record that holds it */
	EVM_UNASSIGNED,    /* in the run, at or past assigned_end: not assigned yet */
	EVM_RETIRED,       /* below retired_below: decided by its builder, or lost with it */
	EVM_OUTSIDE,       /* not an ID of the run */
};

/* A builder as the manager sees it: a copy. */
struct evm_builder_view {
	bool joined;
	bool dead;
	bool busy;                /* below low_water, not yet above high_water */
	uint32_t slots;           /* as it joined */
	uint32_t tokens;          /* slots - in_flight; 0 before it joined and once dead */
	uint64_t in_flight;       /* assigned - decided - lost */
	uint64_t assigned;        /* IDs assigned to it in all */
	uint64_t decided;         /* as its last TOKEN said */
	uint64_t decided_below;   /* as its last TOKEN said */
	uint64_t lost;            /* IDs in flight when it died, and (static) assigned since */
	uint64_t batches;         /* records that name it */
	uint64_t busy_spells;     /* times it went busy */
	uint64_t decided_per_s;   /* its pace as its tokens show it; 0 before it is known */
	uint64_t cap;             /* the most it may hold now: slots, or less by backlog_ns */
	uint64_t last_token_ns;   /* its join or last TOKEN: a builder with events in flight
				   * whose tokens stop is stalled */
};

/* What a builder had when it died: its loss bucket. */
struct evm_loss {
	uint64_t events;          /* assigned, not decided (in_flight): the named loss */
	uint64_t batches;         /* its live batches not wholly decided, now lost */
	uint64_t lowest;          /* lowest ID of those that may be undecided; UINT64_MAX: none */
	uint64_t end;             /* one past the last ID of the last of them; 0: none */
};

/* The run's assignment as a whole. */
struct evm_totals {
	uint64_t assigned_end;    /* the IDs below it are assigned; first_event at first */
	uint64_t retired_below;   /* the live IDs are [retired_below, assigned_end) */
	uint64_t live_batches;    /* assigned, not retired: at most window_batches */
	uint64_t records;         /* assignments made */
	uint64_t lost;            /* IDs lost with dead builders */
	uint32_t alive;           /* builders not dead (joined or not) */
};

struct evm;

/* Allocates the manager of a run. NULL with errno EINVAL (the plan, the
 * mode or the marks out of range) or ENOMEM. */
struct evm *evm_create(const struct evm_config *config);

/* Frees it; NULL is allowed. */
void evm_destroy(struct evm *m);

/* Builder b joins with slots (> high_water) free slots at now_ns.
 * -ENOENT: no such builder; -EALREADY: it joined or is dead; -EINVAL: slots
 * at or below high_water (once busy it could never be free again). */
int evm_join(struct evm *m, uint32_t b, uint32_t slots, uint64_t now_ns);

/* The lanes (core/rails.h) builder b is fed over, 1 .. EVM_MAX_LANES, from
 * its HELLO (1 until said). Its k-th batch comes over lane k mod lanes
 * alone, so each lane needs a batch of its own queued behind the one that
 * arrives, or it idles from a batch's last fragment until the next
 * assignment (measured: 2 x 2 over two rails, 4 KiB fragments, 92 % of the
 * links with the floor of one lane, 98 % with it per lane). -ENOENT: no
 * such builder; -EINVAL: lanes out of range. */
#define EVM_MAX_LANES 4u
int evm_set_lanes(struct evm *m, uint32_t b, uint32_t lanes);

/* Builder b's TOKEN at now_ns: decided is the running total of its assigned
 * IDs it has decided, decided_below an ID below which every ID assigned to
 * it is decided. A builder that holds more than high_water tokens again is
 * free. -ENOENT: no such builder; -ENOTCONN: it has not joined; -ESRCH: it
 * is dead (a stopped builder that resumed is not taken back); -EINVAL: a
 * total that went backwards; -ERANGE: more decided than it was given, or
 * decided_below past assigned_end. Nothing changes on an error. */
int evm_tokens(struct evm *m, uint32_t b, uint64_t decided, uint64_t decided_below,
	       uint64_t now_ns);

/* Makes the next assignment if one can be made now. The hub calls it until
 * it answers anything but EVM_ASSIGNED, after each join and TOKEN. O(M). */
enum evm_next evm_next(struct evm *m, struct evm_assignment *out);

/* Builder b is dead (its control link dropped, or it stalled): no further
 * events (manager), its live batches not wholly decided are lost, and *loss
 * (may be NULL) says what it had. -ENOENT: no such builder; -EALREADY: dead
 * already. O(window_batches). */
int evm_dead(struct evm *m, uint32_t b, struct evm_loss *loss);

/* The record that holds event_id, for the live IDs only (above). O(1). */
enum evm_lookup evm_owner(const struct evm *m, uint64_t event_id, struct evm_assignment *out);

/* Builder b; false when there is no such builder. */
bool evm_builder_view(const struct evm *m, uint32_t b, struct evm_builder_view *v);

struct evm_totals evm_totals(const struct evm *m);

/* Bytes evm_create() allocated: the manager's memory bound. */
size_t evm_memory_bytes(const struct evm *m);

#endif
