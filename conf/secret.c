/* SPDX-License-Identifier: ISC */
/*
 * Secrets the configuration names by path (see confint.h): files that
 * only their owner may read, opened without following a final symlink,
 * checked before a byte of them is used, and wiped from the stack after.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/confint.h"

/*
 * Read the proxy token of an entry from path: a regular file that only
 * its owner may read or write (no group or other bit), holding one line
 * of CONF_TOKEN_MIN to CONF_TOKEN_MAX visible ASCII characters (a final
 * newline is dropped). Return the token, or NULL with *why set.
 */
/* A one-line secret of min to CONF_TOKEN_MAX visible ASCII characters in
 * a file only its owner may access; *why says what it must hold. */
static char *
secret_read(const char *path, size_t min, const char *rule, const char **why)
{
	char buf[CONF_TOKEN_MAX + 3];
	struct stat sb;
	ssize_t n;
	size_t i, len;
	char *t = NULL;
	int fd;

	*why = "cannot be opened";
	/* Non-blocking: a FIFO or device there must not stall the open. */
	if ((fd = open(path,
		 O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)) <
	    0)
		return NULL;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		*why = "is not a regular file";
		goto out;
	}
	if ((sb.st_mode & 077) != 0) {
		*why = "is group- or world-accessible; chmod 600 it";
		goto out;
	}
	if (!conf_secret_owner_ok(sb.st_uid)) {
		*why = CONF_OWNER_WHY; /* whoever owns it may read it */
		goto out;
	}
	*why = rule;
	if ((n = read(fd, buf, sizeof(buf))) < 0)
		goto out;
	len = (size_t)n;
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len < min || len > CONF_TOKEN_MAX)
		goto out;
	for (i = 0; i < len; i++)
		if (buf[i] < 0x21 || buf[i] > 0x7e)
			goto out;
	/* Zero-padded to CONF_TOKEN_MAX + 1 bytes: a comparison may read
	 * all of them whatever the secret's length. */
	if ((t = calloc(1, CONF_TOKEN_MAX + 1)) == NULL)
		*why = "out of memory";
	else
		memcpy(t, buf, len);
out:
	explicit_bzero(buf, sizeof(buf));
	(void)close(fd);
	return t;
}

char *
conf_token_read(const char *path, const char **why)
{
	return secret_read(path, CONF_TOKEN_MIN,
	    "must hold one line of 16 to 256 visible ASCII characters", why);
}

char *
conf_credentials_read(const char *path, const char **why)
{
	static const char rule[] = "must hold one line USER:PASSWORD of 3 to "
				   "256 visible ASCII characters";
	char *c = secret_read(path, 3, rule, why);
	char *colon = c != NULL ? strchr(c, ':') : NULL;

	if (c != NULL && (colon == NULL || colon == c)) {
		explicit_bzero(c, strlen(c));
		free(c);
		*why = rule;
		return NULL;
	}
	return c;
}
