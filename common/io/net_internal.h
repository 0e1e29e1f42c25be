/* What the net module's files share and nothing else includes. */
#ifndef ES_IO_NET_INTERNAL_H
#define ES_IO_NET_INTERNAL_H

#include <stdint.h>

/* A new listening socket on host:port, kept by no one (net.c). */
int net_listen_fresh(const char *host, uint16_t port, uint16_t *bound_port);

#endif
