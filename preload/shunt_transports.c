/* The transports libshunt.so carries, fastest first, as libfabric lists
 * providers: a same-host peer takes shm before fabric is asked. */
#include "core/shunt_transport.h"

const struct shunt_transport_ops *const shunt_transports[] = {
	&shunt_transport_shm,
	&shunt_transport_fabric,
	NULL,
};
