/* The SIGBUS guard of shared mappings; see shmguard.h. */
#include "io/shmguard.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct {
	uintptr_t start, end;
	volatile sig_atomic_t truncated;
} shg_guarded[SHG_MAX_GUARDED];
static struct sigaction shg_previous_bus;
static bool shg_handler_installed;
static uintptr_t shg_page_bytes;

static void shg_on_sigbus(int sig, siginfo_t *si, void *context)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	for (int i = 0; i < SHG_MAX_GUARDED; i++) {
		if (shg_guarded[i].start != 0 && a >= shg_guarded[i].start && a < shg_guarded[i].end) {
			uintptr_t page = a & ~(shg_page_bytes - 1);
			mmap((void *)page, shg_guarded[i].end - page, PROT_READ | PROT_WRITE,
			     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			shg_guarded[i].truncated = 1;
			return;
		}
	}
	/* Not a guarded mapping: what would have happened without us. */
	(void)context;
	sigaction(SIGBUS, &shg_previous_bus, NULL);
	raise(sig);
}

int shg_guard(void *map, size_t bytes)
{
	if (!shg_handler_installed) {
		shg_page_bytes = (uintptr_t)sysconf(_SC_PAGESIZE);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = shg_on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, &shg_previous_bus);
		shg_handler_installed = true;
	}
	for (int i = 0; i < SHG_MAX_GUARDED; i++) {
		if (shg_guarded[i].start == 0) {
			shg_guarded[i].truncated = 0;
			shg_guarded[i].end = (uintptr_t)map + bytes;
			shg_guarded[i].start = (uintptr_t)map;
			return i;
		}
	}
	return -1;
}

void shg_unguard(int slot)
{
	if (slot >= 0 && slot < SHG_MAX_GUARDED)
		shg_guarded[slot].start = shg_guarded[slot].end = 0;
}

bool shg_truncated(int slot)
{
	return slot >= 0 && slot < SHG_MAX_GUARDED && shg_guarded[slot].truncated;
}
