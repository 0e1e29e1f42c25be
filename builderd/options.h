/* What a builder run is given: builderd's options, as main.c parses them.
 * Plain data, read by every module of the run. */
#ifndef ES_BD_OPTIONS_H
#define ES_BD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

struct bd_options {
	uint32_t run_id;
	uint16_t sources;
	uint32_t readers;
	char listen_host[256];
	uint16_t listen_port;
	char control_host[256];
	uint16_t control_port;
	char port_file[1024];
	char metrics_host[256];         /* --metrics-listen; "" = off */
	uint16_t metrics_port;
	char out_dir[1024];
	uint32_t max_inflight;          /* window W, in event IDs */
	uint64_t timeout_ms;
	uint64_t skip_timeout_ms;       /* see bld_config.skip_timeout_ns */
	uint32_t filter_modulo;
	uint32_t filter_cost_us;
	uint32_t flush_every;
	uint32_t max_fragment_bytes;
	uint32_t batch_bytes;
	uint32_t socket_buffer_bytes;   /* kernel buffers of reader connections; 0 = default */
	uint64_t peer_timeout_ms;
	uint64_t handshake_timeout_ms;
	uint64_t stall_timeout_ms;      /* a peer silent this long is given up */
	uint64_t first_event;
	uint64_t events;                /* 0: learnt from the sources */
	bool no_admission;
	char shm_name[64];              /* --shm-listen NAME; "" = no shared memory */
	uint64_t shm_capacity_bytes;    /* ring per co-located reader; 0 = default */
	bool no_clock_correction;       /* measure offsets but apply none */
	bool quiet;
};

#endif
