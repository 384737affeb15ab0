/* I/O vectors, as the data calls hand them to a transport. */
#ifndef SHUNT_IOV_H
#define SHUNT_IOV_H

#include <stddef.h>
#include <sys/uio.h>

#define SHUNT_IOV_MAX 1024 /* UIO_MAXIOV: what the kernel takes in one call */

static inline size_t shunt_iov_total(const struct iovec *v, size_t n)
{
	size_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

/* v without its first skip bytes, into out (room for n entries): how many. */
static inline size_t shunt_iov_skip(const struct iovec *v, size_t n, size_t skip,
				    struct iovec *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (skip >= v[i].iov_len) {
			skip -= v[i].iov_len;
			continue;
		}
		out[k].iov_base = (char *)v[i].iov_base + skip;
		out[k].iov_len = v[i].iov_len - skip;
		skip = 0;
		k++;
	}
	return k;
}

#endif
