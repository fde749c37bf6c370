/* SPDX-License-Identifier: ISC */
/*
 * The grammar of single configuration values (see confint.h): resolver
 * servers, listen addresses, socket owners and request methods. Pure
 * checks of a string; the callers say where it came from.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "conf/confint.h"

/* ADDR[:PORT] with IPv4, or [ADDR] / [ADDR]:PORT with IPv6. */
int
conf_server_is_valid(const char *s, const char **why)
{
	char addr[INET6_ADDRSTRLEN + 1];
	unsigned char bin[16];
	const char *end, *port = NULL;
	uint64_t n;
	size_t len;

	if (s[0] == '[') {
		if ((end = strchr(s, ']')) == NULL) {
			*why = "no ']' after the IPv6 address";
			return 0;
		}
		len = (size_t)(end - s - 1);
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0') {
			*why = "write [ADDR]:PORT";
			return 0;
		}
		if (len == 0 || len >= sizeof(addr)) {
			*why = "not an IPv6 address";
			return 0;
		}
		memcpy(addr, s + 1, len);
		addr[len] = '\0';
		if (strchr(addr, '%') != NULL) {
			*why = "zone ids are not allowed";
			return 0;
		}
		if (inet_pton(AF_INET6, addr, bin) != 1) {
			*why = "not an IPv6 address";
			return 0;
		}
	} else {
		end = strchr(s, ':');
		if (end != NULL && strchr(end + 1, ':') != NULL) {
			*why = "an IPv6 address goes in brackets: write "
			       "[ADDR] or [ADDR]:PORT";
			return 0;
		}
		len = end != NULL ? (size_t)(end - s) : strlen(s);
		if (end != NULL)
			port = end + 1;
		if (len == 0 || len >= sizeof(addr)) {
			*why = "not an IPv4 address";
			return 0;
		}
		memcpy(addr, s, len);
		addr[len] = '\0';
		if (inet_pton(AF_INET, addr, bin) != 1) {
			*why = "not a dotted-quad IPv4 address";
			return 0;
		}
	}
	if (port != NULL && conf_parse_uint(port, 1, 65535, &n) != 0) {
		*why = "the port must be a decimal number from 1 to 65535";
		return 0;
	}
	return 1;
}

/*
 * [metrics] listen: an absolute Unix socket path, or a loopback address
 * with its port (127.0.0.0/8 as ADDR:PORT, ::1 as [::1]:PORT). Names are
 * refused: what a name resolves to could change under the daemon.
 */
int
conf_listen_is_valid(const char *s, const char **why)
{
	char addr[INET6_ADDRSTRLEN + 1];
	unsigned char bin[16];
	const char *colon;
	size_t len;

	if (s[0] == '/') {
		if (strlen(s) < sizeof(((struct sockaddr_un *)0)->sun_path))
			return 1;
		*why = "longer than a Unix socket path may be";
		return 0;
	}
	*why = "write 127.0.0.1:PORT, [::1]:PORT or an absolute Unix "
	       "socket path; only loopback is served";
	if ((colon = strrchr(s, ':')) == NULL ||
	    (s[0] == '[' && (colon == s || colon[-1] != ']')) ||
	    !conf_server_is_valid(s, why))
		return 0;
	len = (size_t)(colon - s);
	if (s[0] == '[') {
		if (len != 5 || strncmp(s, "[::1]", 5) != 0) {
			*why =
			    "not a loopback address; only loopback is "
			    "served (127.0.0.0/8, ::1) or a Unix socket path";
			return 0;
		}
		return 1;
	}
	memcpy(addr, s, len);
	addr[len] = '\0';
	if (inet_pton(AF_INET, addr, bin) != 1 || bin[0] != 127) {
		*why = "not a loopback address; only loopback is served "
		       "(127.0.0.0/8, ::1) or a Unix socket path";
		return 0;
	}
	return 1;
}

/* A user or group: a name, or a numeric id. Kept as written. */
int
conf_owner_is_valid(const char *s)
{
	uint64_t n;
	size_t i, len = strlen(s);

	if (strspn(s, "0123456789") == len)
		return conf_parse_uint(s, 0, CONF_ID_MAX, &n) == 0;
	if (len > 32 || s[0] == '-' || s[0] == '.')
		return 0;
	for (i = 0; i < len; i++) {
		char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')
			continue;
		if (c == '$' && i == len - 1 && i > 0)
			continue;
		return 0;
	}
	return 1;
}

/* A method name: an HTTP token of upper-case letters, digits and '-'. */
int
conf_method_is_valid(const char *m)
{
	size_t i, n = strlen(m);

	if (n == 0 || n > CONF_METHOD_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((m[i] >= 'A' && m[i] <= 'Z') ||
			(m[i] >= '0' && m[i] <= '9') || m[i] == '-'))
			return 0;
	return 1;
}
