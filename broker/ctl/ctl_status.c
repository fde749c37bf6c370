/* SPDX-License-Identifier: ISC */
/*
 * egressctl status | instances | instance NAME | grants NAME | metrics |
 * attach NAME [-- COMMAND...]: front-ends of the broker's control socket
 * (broker/control.h). Each sends one command, reads one reply and prints
 * it as a readable table, or as the broker's JSON with --json. The socket
 * is --socket PATH, else [broker] control_socket of the configuration,
 * else /run/egressd/control.sock. `attach` receives a connection bound to
 * the instance and runs COMMAND with it at fd 3 and EGRESS_FD=3 (without
 * COMMAND it only reports that the broker handed one out). Exit status:
 * 0 success, 1 the broker answered with an error, 2 usage or the socket
 * cannot be reached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "broker/net/unixsock.h"
#include "broker/ctl/ctl.h"
#include "conf/conf.h"

#define STATUS_REPLY_MAX	(4 * 1024 * 1024)
#define STATUS_DEFAULT_SOCKET	"/run/egressd/control.sock"

struct reply {
	char *buf;
	size_t len;
	int fd;
};

/* Send cmd, read one reply: a line, or metrics text up to "# EOF\n". */
static int
status_request(const char *path, const char *cmd, int metrics,
    struct reply *ret)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	size_t cap = 65536;
	int fd, done = 0;
	ssize_t n;

	ret->buf = NULL;
	ret->len = 0;
	ret->fd = -1;
	if ((fd = unixsock_connect(path)) < 0)
		return -1;
	if (write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd) ||
	    (ret->buf = malloc(cap)) == NULL) {
		(void)close(fd);
		return -1;
	}
	while (!done) {
		struct iovec iov;
		struct msghdr mh;
		struct cmsghdr *h;

		if (ret->len + 1 >= cap) {
			char *nb;

			if (cap >= STATUS_REPLY_MAX ||
			    (nb = realloc(ret->buf, cap * 2)) == NULL)
				break;
			ret->buf = nb;
			cap *= 2;
		}
		iov.iov_base = ret->buf + ret->len;
		iov.iov_len = cap - ret->len - 1;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		h = CMSG_FIRSTHDR(&mh);
		if (h != NULL && h->cmsg_level == SOL_SOCKET &&
		    h->cmsg_type == SCM_RIGHTS && ret->fd < 0)
			memcpy(&ret->fd, CMSG_DATA(h), sizeof(int));
		ret->len += (size_t)n;
		ret->buf[ret->len] = '\0';
		if (metrics && ret->buf[0] != '{')
			done = ret->len >= 6 && strcmp(ret->buf + ret->len - 6,
			    "# EOF\n") == 0;
		else
			done = ret->buf[ret->len - 1] == '\n';
	}
	(void)close(fd);
	if (!done) {
		errno = EPROTO;
		return -1;
	}
	return 0;
}

static const char *
sval(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_string(v))
		return json_string_value(v);
	return "-";
}

static long long
ival(json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static void
print_list(const char *label, json_t *a)
{
	size_t i;
	json_t *v;

	printf("%-26s", label);
	if (json_array_size(a) == 0)
		printf(" (none)");
	json_array_foreach(a, i, v)
		printf("%s%s", i ? ", " : " ", json_string_value(v));
	printf("\n");
}

static void
print_status(json_t *o)
{
	json_t *c = json_object_get(o, "config");
	json_t *l = json_object_get(o, "local_addresses");
	json_t *n = json_object_get(o, "nat64");

	printf("version:         %s\n", sval(o, "version"));
	printf("uptime:          %llds\n", ival(o, "uptime_s"));
	printf("configuration:   %s (generation %lld, loaded %s)\n",
	    sval(c, "path"), ival(c, "generation"), sval(c, "loaded_at"));
	printf("config error:    %s\n", json_is_string(json_object_get(c,
	    "error")) ? sval(c, "error") : "none");
	printf("reloads:         %lld (%lld failed)\n", ival(c, "reloads"),
	    ival(c, "reload_failures"));
	printf("instances:       %lld\n", ival(o, "instances"));
	printf("connections:     %lld\n", ival(o, "connections"));
	printf("requests:        %lld\n", ival(o, "requests"));
	printf("leases:          %lld\n", ival(o, "leases"));
	print_list("host addresses:", json_object_get(l, "addresses"));
	if (json_is_string(json_object_get(n, "warning"))) {
		printf("NAT64 warning:   %s\n", sval(n, "warning"));
		printf("  add to [security]: %s\n", sval(n, "suggestion"));
	} else
		printf("NAT64:           no undeclared prefix\n");
}

static void
print_instances(json_t *o)
{
	json_t *a = json_object_get(o, "instances"), *v;
	size_t i;

	printf("%-20s %-16s %-10s %-8s %7s %9s %9s %12s %12s\n", "INSTANCE",
	    "PLUGIN", "VERSION", "MANIFEST", "LEASES", "ALLOWED", "DENIED",
	    "BYTES_IN", "BYTES_OUT");
	json_array_foreach(a, i, v) {
		char leases[32];

		(void)snprintf(leases, sizeof(leases), "%lld/%lld",
		    ival(v, "leases"), ival(v, "budget"));
		printf("%-20s %-16s %-10s %-8s %7s %9lld %9lld %12lld %12lld\n",
		    sval(v, "name"), sval(v, "plugin"), sval(v, "version"),
		    sval(v, "manifest"), leases, ival(v, "allowed"),
		    ival(v, "denied"), ival(v, "bytes_in"),
		    ival(v, "bytes_out"));
	}
}

static void
print_instance(json_t *o)
{
	json_t *r = json_object_get(o, "denied_by_reason"), *v;
	const char *k;

	printf("instance:   %s\n", sval(o, "name"));
	printf("plugin:     %s %s\n", sval(o, "plugin"), sval(o, "version"));
	printf("manifest:   %s (signature %s)\n", sval(o, "manifest"),
	    sval(o, "signature"));
	if (json_is_string(json_object_get(o, "manifest_error")))
		printf("  error:    %s\n", sval(o, "manifest_error"));
	printf("socket:     %s\n", sval(o, "socket"));
	print_list("permissions:", json_object_get(o, "permissions"));
	printf("leases:     %lld of %lld\n", ival(o, "leases"),
	    ival(o, "budget"));
	printf("allowed:    %lld\n", ival(o, "allowed"));
	printf("denied:     %lld\n", ival(o, "denied"));
	json_object_foreach(r, k, v)
		printf("  %-22s %lld\n", k, (long long)json_integer_value(v));
	printf("bytes:      %lld in, %lld out\n", ival(o, "bytes_in"),
	    ival(o, "bytes_out"));
}

static void
print_grants(json_t *o)
{
	printf("instance: %s (plugin %s)\n", sval(o, "instance"),
	    sval(o, "plugin"));
	if (!json_is_true(json_object_get(o, "manifest_ok")))
		printf("manifest refused: the instance reaches nothing\n");
	printf("operator defined: %s\n", json_is_true(json_object_get(o,
	    "operator_defined")) ? "yes (the grant alone governs)" :
	    "no (grant AND declaration)");
	print_list("permissions:", json_object_get(o, "permissions"));
	print_list("effective reach:", json_object_get(o, "effective"));
	print_list("private carve-outs:",
	    json_object_get(o, "allow_private_effective"));
	print_list("granted, not effective:",
	    json_object_get(o, "granted_not_effective"));
	print_list("declared, not granted:",
	    json_object_get(o, "declared_not_granted"));
}

static void
usage(const char *cmd)
{
	fprintf(stderr, "usage: egressctl [-c FILE] %s [--socket PATH] "
	    "[--json]%s\n", cmd,
	    strcmp(cmd, "instance") == 0 || strcmp(cmd, "grants") == 0 ?
	    " NAME" : strcmp(cmd, "attach") == 0 ?
	    " NAME [-- COMMAND [ARG...]]" : "");
}

/* [broker] control_socket of the configuration, if it loads. */
static char *
socket_from_config(const char *path)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0, NULL };
	char *p = NULL;

	if (conf_load(path, &s, &errs) == 0) {
		p = strdup(s->control_socket);
		conf_snapshot_free(s);
	}
	conf_errors_done(&errs);
	return p;
}

int
ctl_status_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	const char *cmd = argv[0], *sock = NULL, *name = NULL;
	char line[256], *cfgsock = NULL;
	struct reply r = { NULL, 0, -1 };
	json_t *doc = NULL;
	int i, json = 0, rc = CTL_EXIT_ERROR, metrics, need_name, cmdi = -1;

	metrics = strcmp(cmd, "metrics") == 0;
	need_name = strcmp(cmd, "instance") == 0 ||
	    strcmp(cmd, "grants") == 0 || strcmp(cmd, "attach") == 0;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			sock = argv[++i];
		else if (strcmp(argv[i], "--") == 0 &&
		    strcmp(cmd, "attach") == 0) {
			cmdi = i + 1;
			break;
		} else if (argv[i][0] != '-' && need_name && name == NULL)
			name = argv[i];
		else {
			usage(cmd);
			return CTL_EXIT_ERROR;
		}
	}
	if (need_name != (name != NULL) || (cmdi >= 0 && cmdi >= argc)) {
		usage(cmd);
		return CTL_EXIT_ERROR;
	}
	if (name != NULL && (strlen(name) > CONF_NAME_MAX ||
	    strpbrk(name, " \t\r\n") != NULL)) {
		fprintf(stderr, "egressctl: bad instance name\n");
		return CTL_EXIT_ERROR;
	}
	if (sock == NULL && (cfgsock = socket_from_config(ctx->config_path)) !=
	    NULL)
		sock = cfgsock;
	if (sock == NULL)
		sock = STATUS_DEFAULT_SOCKET;
	if (strcmp(cmd, "status") == 0 || strcmp(cmd, "instances") == 0 ||
	    metrics)
		(void)snprintf(line, sizeof(line), "show %s\n", cmd);
	else if (strcmp(cmd, "attach") == 0)
		(void)snprintf(line, sizeof(line), "attach %s\n", name);
	else
		(void)snprintf(line, sizeof(line), "show %s %s\n", cmd, name);
	if (status_request(sock, line, metrics, &r) != 0) {
		fprintf(stderr, "egressctl: %s: %s\n", sock, strerror(errno));
		goto out;
	}
	if (metrics && r.buf[0] != '{') {
		fputs(r.buf, stdout);
		rc = CTL_EXIT_OK;
		goto out;
	}
	if ((doc = json_loads(r.buf, 0, NULL)) == NULL) {
		fprintf(stderr, "egressctl: the broker's reply is not JSON\n");
		goto out;
	}
	if (json_object_get(doc, "error") != NULL) {
		if (json)
			fputs(r.buf, stdout);
		else
			fprintf(stderr, "egressctl: %s: %s\n", cmd,
			    sval(doc, "error"));
		rc = CTL_EXIT_NO;
		goto out;
	}
	rc = CTL_EXIT_OK;
	if (strcmp(cmd, "attach") == 0) {
		if (r.fd < 0) {
			fprintf(stderr, "egressctl: attach: no descriptor\n");
			rc = CTL_EXIT_ERROR;
			goto out;
		}
		if (cmdi < 0) {
			printf("attached: the broker handed out a connection "
			    "bound to %s\n", name);
			goto out;
		}
		if (r.fd != 3) {
			if (dup2(r.fd, 3) != 3)
				goto out;
			(void)close(r.fd);
		}
		r.fd = -1;
		(void)setenv("EGRESS_FD", "3", 1);
		fflush(stdout);
		execvp(argv[cmdi], argv + cmdi);
		fprintf(stderr, "egressctl: %s: %s\n", argv[cmdi],
		    strerror(errno));
		rc = CTL_EXIT_ERROR;
		goto out;
	}
	if (json)
		fputs(r.buf, stdout);
	else if (strcmp(cmd, "status") == 0)
		print_status(doc);
	else if (strcmp(cmd, "instances") == 0)
		print_instances(doc);
	else if (strcmp(cmd, "instance") == 0)
		print_instance(doc);
	else
		print_grants(doc);
out:
	json_decref(doc);
	free(r.buf);
	if (r.fd >= 0)
		(void)close(r.fd);
	free(cfgsock);
	return rc;
}
