/* libfabric, loaded by the first connection that needs it.
 *
 * Linked in, libfabric would be loaded into every process that preloads
 * shunt, with what it links: on Debian, libpsm_infinipath's libinfinipath,
 * whose constructor calibrates its clock with usleep() for 100 ms (up to
 * ten tries), and the verbs provider, which reads all of /proc/kallsyms at
 * initialisation.  That is 100-200 ms added to the start of every program,
 * fabric or not.  So libshunt.so does not link it: the few libfabric
 * functions that are not inline (the rest go through the fid's ops tables)
 * are defined here, under their own names through fab_internal.h, and
 * forward to libfabric.so.1 opened on first use.  A process that never
 * makes a connection to another host never loads it.
 *
 * A libfabric that cannot be loaded behaves as one with no provider: every
 * fi_getinfo fails and remote connections take the kernel path
 * (provider-error). */
#include <dlfcn.h>
#include <pthread.h>

#include "fab_internal.h"
#include "core/shunt_log.h"

#define FAB_LIB_NAME "libfabric.so.1"

static struct {
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
		       struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	const char *(*strerror)(int);
} lib;
static int lib_ok;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void)
{
	/* Under the guard: the constructors of libfabric's dependencies, and
	 * libfabric itself, open files and sockets of their own. */
	SHUNT_GUARD_ENTER();
	void *h = dlopen(FAB_LIB_NAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		*(void **)&lib.getinfo = dlsym(h, "fi_getinfo");
		*(void **)&lib.freeinfo = dlsym(h, "fi_freeinfo");
		*(void **)&lib.dupinfo = dlsym(h, "fi_dupinfo");
		*(void **)&lib.fabric = dlsym(h, "fi_fabric");
		*(void **)&lib.strerror = dlsym(h, "fi_strerror");
		lib_ok = lib.getinfo && lib.freeinfo && lib.dupinfo && lib.fabric && lib.strerror;
	}
	if (lib_ok)
		SHUNT_DEBUG("fabric: libfabric loaded");
	if (!lib_ok) {
		const char *e = dlerror();
		SHUNT_INFO("fabric: %s unusable (%s): remote connections take TCP", FAB_LIB_NAME,
			   e ? e : "symbols missing");
	}
	SHUNT_GUARD_LEAVE();
}

/* 1 once libfabric is loaded (loading it the first time). */
static int lib_get(void)
{
	pthread_once(&lib_once, lib_load);
	return lib_ok;
}

int fab_fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	if (!lib_get())
		return -FI_ENODATA;
	return lib.getinfo(version, node, service, flags, hints, info);
}

void fab_fi_freeinfo(struct fi_info *info)
{
	/* Every fi_info was made by a loaded libfabric. */
	if (info && lib_get())
		lib.freeinfo(info);
}

struct fi_info *fab_fi_dupinfo(const struct fi_info *info)
{
	return lib_get() ? lib.dupinfo(info) : NULL;
}

int fab_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	if (!lib_get())
		return -FI_ENODATA;
	return lib.fabric(attr, fabric, context);
}

const char *fab_fi_strerror(int errnum)
{
	return lib_get() ? lib.strerror(errnum) : "libfabric not loaded";
}
