#include "io/shmlink.h"

#include "wire/frame.h"
#include "io/shmring.h"

#include <stdio.h>
#include <string.h>

bool shl_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > SHL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == '_' || c == '-';
		if (!ok)
			return false;
	}
	/* "." and ".." would make odd file names in /dev/shm. */
	return name[0] != '.';
}

void shl_socket_name(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "es-%s", name);
}

void shl_segment_name(char *buf, size_t len, const char *name, uint32_t reader)
{
	snprintf(buf, len, "/es-%s-r%u", name, reader);
}

uint64_t shl_capacity(uint64_t requested_bytes, uint32_t max_fragment_bytes, bool *raised)
{
	/* A record of the largest frame: prefix, header, payload, 8-aligned. */
	uint64_t record = (SHR_RECORD_PREFIX_BYTES + FRM_HEADER_BYTES + (uint64_t)max_fragment_bytes +
			   7) & ~(uint64_t)7;
	uint64_t need = 2 * record;
	uint64_t cap = SHR_MIN_CAPACITY_BYTES;
	uint64_t want = requested_bytes > need ? requested_bytes : need;
	while (cap < want && cap < SHR_MAX_CAPACITY_BYTES)
		cap <<= 1;
	*raised = cap != requested_bytes;
	return cap;
}
