/* SPDX-License-Identifier: ISC */
/*
 * libegress connections: connect to an instance socket by path, adopt an
 * inherited descriptor, or the one EGRESS_FD names; the connection
 * itself is client.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <egress/egress.h>

#include "shim/shim.h"

int
egress_client_connect(const char *path, struct egress_client **ret_client)
{
	struct sockaddr_un sun;
	size_t len;
	int fd, rv;

	if (path == NULL || path[0] == '\0' || ret_client == NULL)
		return EGRESS_ERR_INVALID;
	len = strlen(path);
	if (len >= sizeof(sun.sun_path))
		return EGRESS_ERR_TOO_BIG;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, len);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return EGRESS_ERR_IO;
	while ((rv = connect(fd, (struct sockaddr *)&sun, sizeof(sun))) != 0 &&
	    errno == EINTR)
		;
	if (rv != 0) {
		(void)close(fd);
		return EGRESS_ERR_UNAVAILABLE;
	}
	rv = shim_client_new(fd, ret_client);
	if (rv < 0)
		(void)close(fd);
	return rv;
}

int
egress_client_from_fd(int fd, struct egress_client **ret_client)
{
	struct sockaddr_un sun;
	socklen_t sl;
	int v, flags;

	if (fd < 0 || ret_client == NULL)
		return EGRESS_ERR_INVALID;
	sl = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &sl) != 0 ||
	    v != AF_UNIX)
		return EGRESS_ERR_INVALID;
	sl = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &sl) != 0 ||
	    v != SOCK_STREAM)
		return EGRESS_ERR_INVALID;
	sl = sizeof(sun);
	if (getpeername(fd, (struct sockaddr *)&sun, &sl) != 0)
		return EGRESS_ERR_INVALID;
	flags = fcntl(fd, F_GETFD);
	if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
		return EGRESS_ERR_IO;
	return shim_client_new(fd, ret_client);
}

int
egress_client_from_env(struct egress_client **ret_client)
{
	const char *s = getenv(EGRESS_FD_ENV);
	char *end;
	long v;

	if (s == NULL || s[0] == '\0')
		return EGRESS_ERR_NOT_FOUND;
	if (s[0] < '0' || s[0] > '9')
		return EGRESS_ERR_INVALID;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX)
		return EGRESS_ERR_INVALID;
	return egress_client_from_fd((int)v, ret_client);
}
