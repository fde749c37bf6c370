/* SPDX-License-Identifier: ISC */
/*
 * unixsock: a blocking connect to a Unix stream socket by path.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "broker/net/unixsock.h"

int
unixsock_connect(const char *path)
{
	struct sockaddr_un sun;
	size_t len = strlen(path);
	int fd, e;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (len >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, len);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}
