#include "config.h"

#include "sys/opt.h"
#include "wire/frame.h"

uint32_t rdr_link_rails(const struct rdr_options *opt, uint32_t b)
{
	return opt->links[b].rails > 0 ? opt->links[b].rails : 1;
}

uint32_t rdr_connection_count(const struct rdr_options *opt)
{
	uint32_t n = 0, links = opt->link_count > 0 ? opt->link_count : 1;
	for (uint32_t b = 0; b < links; b++)
		n += rdr_link_rails(opt, b);
	return n;
}

size_t rdr_buffer_bytes(const struct rdr_options *opt)
{
	return opt->source_count *
	       ((size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES);
}

uint32_t rdr_source_frames(const struct rdr_options *opt)
{
	size_t cap = (size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES;
	uint64_t conns = rdr_connection_count(opt);
	uint64_t pending = opt->pending_frames > 0 ? opt->pending_frames : RDR_PENDING_FRAMES_DEFAULT;
	uint64_t by_queues = conns * pending + 2, by_buffer = cap / FRM_HEADER_BYTES + 2;
	uint64_t n = by_queues < by_buffer ? by_queues : by_buffer;
	return n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

bool rdr_parse_shm_inject(const char *arg, enum rdr_shm_inject *kind, uint64_t *after)
{
	static const char *const names[] = { "record", "crc", "length", "head" };
	static const enum rdr_shm_inject kinds[] = { RDR_SHM_INJECT_RECORD, RDR_SHM_INJECT_CRC,
						     RDR_SHM_INJECT_LENGTH, RDR_SHM_INJECT_HEAD };
	size_t k;
	if (!opt_kind_at(arg, names, sizeof names / sizeof names[0], &k, after))
		return false;
	*kind = kinds[k];
	return true;
}
