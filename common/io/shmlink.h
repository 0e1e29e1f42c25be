/* What builderd and a co-located readoutd agree on for a shared-memory data
 * path besides the ring itself (common/io/shmring.h): the names derived from
 * the builder's --shm-listen NAME, the ring's capacity rule and the one-byte
 * messages on the Unix socket that stays open for the run. docs/SHM.md
 * describes the handshake. */
#ifndef ES_IO_SHMLINK_H
#define ES_IO_SHMLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NAME: letters, digits, '.', '_' and '-', at most this many bytes, so that
 * the socket and segment names below stay far from their system limits. */
#define SHL_NAME_MAX 48u
#define SHL_DEFAULT_CAPACITY_BYTES (4ULL << 20)

/* Sent by the reader on the Unix socket once it has attached to the ring:
 * the builder then unlinks the segment name, so that nothing is left in
 * /dev/shm whichever process dies afterwards. */
#define SHL_ATTACHED_BYTE 'A'

/* True when name is a valid NAME (see SHL_NAME_MAX). */
bool shl_name_valid(const char *name);

/* "es-NAME": the abstract Unix socket ("\0es-NAME") builderd listens on. */
void shl_socket_name(char *buf, size_t len, const char *name);

/* "/es-NAME-r<reader>": reader's ring segment (/dev/shm/es-NAME-r<reader>). */
void shl_segment_name(char *buf, size_t len, const char *name, uint32_t reader);

/* The ring capacity for a request: rounded up to a power of two, at least
 * what holds two frames of max_fragment_bytes (a record takes at most half
 * the ring), within the ring's limits. *raised tells whether the result
 * differs from the request. */
uint64_t shl_capacity(uint64_t requested_bytes, uint32_t max_fragment_bytes, bool *raised);

#endif
