/* What a reader is asked to do: its options as plain data (filled by
 * options.c from the command line) and what follows from them alone (the
 * data connections of each link, the frames and bytes a source may hold).
 * Every module of readoutd reads this; it reads none of them. */
#ifndef ES_READOUTD_CONFIG_H
#define ES_READOUTD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each source is a group in the reader's END report, which holds CTL_MAX_GROUPS. */
#define RDR_MAX_SOURCES 32u
/* Builders a reader may link to: CTL_MAX_BUILDERS. */
#define RDR_MAX_LINKS 256u
/* TCP connections of one link, one per rail (core/rails.h): CTL_MAX_RAILS. */
#define RDR_MAX_RAILS 4u
/* --pending-frames and --pending-bytes when not given (options.c's too). */
#define RDR_PENDING_FRAMES_DEFAULT 8192u
#define RDR_PENDING_BYTES_DEFAULT (16u << 20)

/* Test hook (--shm-inject): the damage a builder must detect in a ring. */
enum rdr_shm_inject {
	RDR_SHM_INJECT_NONE,
	RDR_SHM_INJECT_RECORD,   /* a record one byte shorter than its frame */
	RDR_SHM_INJECT_CRC,      /* a whole frame with a flipped byte */
	RDR_SHM_INJECT_LENGTH,   /* a record word with an impossible length */
	RDR_SHM_INJECT_HEAD,     /* a head counter no consumer may believe */
};

/* One TCP connection of a link: its builder's listener on one rail. */
struct rdr_rail {
	char host[256];
	uint16_t port;
};

/* One builder's data path: tcp://HOST:PORT once per rail (core/rails.h),
 * or shm://NAME on its host (one ring whatever the rails). */
struct rdr_link {
	struct rdr_rail rail[RDR_MAX_RAILS];  /* tcp://: rail k's URL, in rail order */
	uint32_t rails;                       /* 1 .. RDR_MAX_RAILS; 1 for shm:// */
	char shm[64];                         /* shm://NAME: NAME; "" for tcp:// */
};

struct rdr_options {
	uint32_t id;
	uint32_t run_id;
	char listen_host[256];
	uint16_t listen_port;
	char port_file[1024];
	char metrics_host[256];        /* --metrics-listen; "" = off */
	uint16_t metrics_port;
	uint16_t sources[RDR_MAX_SOURCES];
	size_t source_count;
	/* --builder URL: links[0], admitted by the builder's CREDIT.
	 * --builder B=URL (routing): links[B], B = 0 .. link_count-1, routed
	 * by the hub's assignments (docs/BUILDERS.md). Either repeated: the
	 * link's next rail. */
	struct rdr_link links[RDR_MAX_LINKS];
	uint32_t link_count;
	bool routing;
	bool link_given[RDR_MAX_LINKS];  /* parsing: which B came */
	bool plain_given;
	uint32_t pending_frames;       /* per connection: --pending-frames */
	uint64_t pending_bytes;        /* per connection: --pending-bytes */
	enum rdr_shm_inject shm_inject;
	uint64_t shm_inject_after;     /* records forwarded before the bad one */
	uint64_t forward_stall_bytes;  /* test hook: forward nothing more past this; 0 = off */
	uint64_t skip_assign;          /* test hook: the hub's N-th ASSIGN taken as lost; 0 = off */
	char control_host[256];
	uint16_t control_port;
	uint32_t max_fragment_bytes;
	uint32_t batch_bytes;          /* bytes read per call and per source */
	uint32_t socket_buffer_bytes;  /* kernel buffers of each builder connection; 0 = default */
	uint64_t connect_timeout_ms;
	uint64_t handshake_timeout_ms;
	/* A streaming source whose connection delivers no complete frame for
	 * this long while the reader is reading it is given up as lost; 0 = off. */
	uint64_t source_idle_timeout_ms;
	bool quiet;
};

/* Parses --shm-inject KIND@N; false when KIND is unknown or N malformed. */
bool rdr_parse_shm_inject(const char *arg, enum rdr_shm_inject *kind, uint64_t *after);

/* Memory of the receive buffers: sources x (batch + max fragment + 42). */
size_t rdr_buffer_bytes(const struct rdr_options *opt);
/* Frames one source may have unwritten: what its buffer can hold, and at
 * most what every connection's queue can. */
uint32_t rdr_source_frames(const struct rdr_options *opt);
/* Link b's data connections: its rails (1 for shm://, or when not set). */
uint32_t rdr_link_rails(const struct rdr_options *opt, uint32_t b);
/* The data connections of every link: the sum of their rails. */
uint32_t rdr_connection_count(const struct rdr_options *opt);

#endif
