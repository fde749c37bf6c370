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
 * 0 success, 1 the broker answered no (no such instance), 2 a usage
 * error, 4 the socket cannot be reached or the reply is not understood.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include <egress/error.h>

#include "broker/net/unixsock.h"
#include "broker/ctl/ctl.h"
#include "conf/conf.h"

#define STATUS_REPLY_MAX      (4 * 1024 * 1024)
#define STATUS_DEFAULT_SOCKET "/run/egressd/control.sock"

struct reply {
	char *buf;
	size_t len;
	int fd;
};

/* Send cmd, read one reply: a line, or metrics text up to the empty line
 * that ends it. */
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
			done = ret->len >= 2 &&
			    strcmp(ret->buf + ret->len - 2, "\n\n") == 0;
		else
			done = ret->buf[ret->len - 1] == '\n';
	}
	(void)close(fd);
	if (!done) {
		errno = EPROTO;
		return -1;
	}
	if (metrics && ret->buf[0] != '{')
		ret->buf[--ret->len] = '\0'; /* the exposition alone */
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

/* Print "label:" padded to width columns, then the value's first space. */
static void
label(int width, const char *l)
{
	printf("%-*s", width, l);
}

static void
print_list(int width, const char *l, json_t *a)
{
	size_t i;
	json_t *v;

	label(width, l);
	if (json_array_size(a) == 0)
		printf("(none)");
	json_array_foreach(a, i, v)
		printf("%s%s", i ? ", " : "", json_string_value(v));
	printf("\n");
}

#define STATUS_W 20

/*
 * The status table. decided is the sum of every instance's allowed and
 * denied counters (from `show instances`), or NULL when that failed;
 * requests is what the broker serves at this moment.
 */
static void
print_status(json_t *o, json_t *insts)
{
	json_t *c = json_object_get(o, "config");
	json_t *l = json_object_get(o, "local_addresses");
	json_t *n = json_object_get(o, "nat64");
	long long allowed = 0, denied = 0;
	json_t *v;
	size_t i;

	label(STATUS_W, "version:");
	printf("%s\n", sval(o, "version"));
	label(STATUS_W, "uptime:");
	printf("%llds\n", ival(o, "uptime_s"));
	label(STATUS_W, "configuration:");
	printf("%s (generation %lld, loaded %s)\n", sval(c, "path"),
	    ival(c, "generation"), sval(c, "loaded_at"));
	label(STATUS_W, "config error:");
	if (json_is_string(json_object_get(c, "error"))) {
		printf("%s (since %s; serving nothing until fixed)\n",
		    sval(c, "error"), sval(c, "error_since"));
		json_array_foreach(json_object_get(c, "errors"), i, v)
			if (i > 0)
				printf("%-*s%s\n", STATUS_W, "",
				    json_string_value(v));
	} else
		printf("none\n");
	label(STATUS_W, "reloads:");
	printf("%lld (%lld failed)\n", ival(c, "reloads"),
	    ival(c, "reload_failures"));
	label(STATUS_W, "config watch:");
	printf("%s\n", sval(c, "watch"));
	label(STATUS_W, "instances:");
	printf("%lld\n", ival(o, "instances"));
	label(STATUS_W, "connections:");
	printf("%lld plugin connections open\n", ival(o, "connections"));
	label(STATUS_W, "requests:");
	if (insts != NULL) {
		json_array_foreach(json_object_get(insts, "instances"), i, v) {
			allowed += ival(v, "allowed");
			denied += ival(v, "denied");
		}
		printf("%lld decided since start (%lld allowed, %lld denied), "
		       "%lld in flight\n",
		    allowed + denied, allowed, denied, ival(o, "requests"));
	} else
		printf("%lld in flight\n", ival(o, "requests"));
	label(STATUS_W, "upstream leases:");
	printf("%lld held (idle pooled connections included)\n",
	    ival(o, "leases"));
	print_list(STATUS_W,
	    "host addresses:", json_object_get(l, "addresses"));
	if (json_is_string(json_object_get(n, "warning"))) {
		label(STATUS_W, "NAT64 warning:");
		printf("%s\n", sval(n, "warning"));
		label(STATUS_W, "  add to [security]:");
		printf("%s\n", sval(n, "suggestion"));
	} else {
		label(STATUS_W, "NAT64:");
		printf("no undeclared prefix\n");
	}
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
		printf(
		    "%-20s %-16s %-10s %-8s %7s %9lld %9lld %12lld %12lld\n",
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

	label(STATUS_W, "instance:");
	printf("%s\n", sval(o, "name"));
	label(STATUS_W, "plugin:");
	printf("%s %s\n", sval(o, "plugin"), sval(o, "version"));
	label(STATUS_W, "manifest:");
	printf("%s (signature %s)\n", sval(o, "manifest"),
	    sval(o, "signature"));
	if (json_is_string(json_object_get(o, "manifest_error"))) {
		label(STATUS_W, "  error:");
		printf("%s\n", sval(o, "manifest_error"));
	}
	label(STATUS_W, "socket:");
	printf("%s\n", sval(o, "socket"));
	print_list(STATUS_W,
	    "permissions:", json_object_get(o, "permissions"));
	print_list(STATUS_W,
	    "tls profiles:", json_object_get(o, "tls_profiles"));
	label(STATUS_W, "upstream leases:");
	printf("%lld held of %lld\n", ival(o, "leases"), ival(o, "budget"));
	label(STATUS_W, "allowed:");
	printf("%lld\n", ival(o, "allowed"));
	label(STATUS_W, "denied:");
	printf("%lld\n", ival(o, "denied"));
	json_object_foreach(r, k, v) {
		char kl[80];

		(void)snprintf(kl, sizeof(kl), "  %s:", k);
		label(STATUS_W, kl);
		printf("%lld\n", (long long)json_integer_value(v));
	}
	label(STATUS_W, "bytes:");
	printf("%lld in, %lld out\n", ival(o, "bytes_in"),
	    ival(o, "bytes_out"));
}

static void
print_grants(json_t *o)
{
	const int w = 25;

	label(w, "instance:");
	printf("%s (plugin %s)\n", sval(o, "instance"), sval(o, "plugin"));
	if (!json_is_true(json_object_get(o, "manifest_ok"))) {
		label(w, "manifest:");
		printf("refused: the instance reaches nothing\n");
	}
	label(w, "operator defined:");
	printf("%s\n",
	    json_is_true(json_object_get(o, "operator_defined")) ?
		"yes (the grant alone governs)" :
		"no (grant AND declaration)");
	print_list(w, "permissions:", json_object_get(o, "permissions"));
	print_list(w, "effective reach:", json_object_get(o, "effective"));
	print_list(w, "private carve-outs:",
	    json_object_get(o, "allow_private_effective"));
	print_list(w, "loopback carve-outs:",
	    json_object_get(o, "allow_loopback_effective"));
	print_list(w, "granted, not effective:",
	    json_object_get(o, "granted_not_effective"));
	print_list(w, "declared, not granted:",
	    json_object_get(o, "declared_not_granted"));
}

static void
usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: egressctl [-c FILE] %s [--socket PATH]%s%s\n", cmd,
	    strcmp(cmd, "metrics") == 0 || strcmp(cmd, "attach") == 0 ?
		"" :
		" [--json]",
	    strcmp(cmd, "instance") == 0 || strcmp(cmd, "grants") == 0 ?
		" NAME" :
		strcmp(cmd, "attach") == 0 ? " NAME [-- COMMAND [ARG...]]" :
					     "");
}

/*
 * [broker] control_socket of the configuration at path, read even when
 * other parts of the file are invalid (the broker still listens there).
 * When the file is invalid, say so on stderr, and when the line itself
 * cannot be read, that the default is used and why. NULL when the file
 * cannot be read at all (said too).
 */
static char *
socket_from_config(const char *cmd, const char *path)
{
	struct conf_errors errs = { 0, NULL };
	char *p = NULL;
	int found = 0, err;

	if ((err = conf_peek_control_socket(path, &p, &found, &errs)) != 0) {
		/* No file at the default path: the default socket, quietly. */
		if (err != EGRESS_ERR_NOT_FOUND ||
		    strcmp(path, CONF_DEFAULT_PATH) != 0)
			fprintf(stderr,
			    "egressctl: %s: %s; using the default "
			    "control socket %s\n",
			    cmd, errs.n > 0 ? errs.msgs[0] : path,
			    STATUS_DEFAULT_SOCKET);
		p = NULL;
	} else if (errs.n > 0 && found)
		fprintf(stderr,
		    "egressctl: %s: note: %s is invalid (%s%s); "
		    "its [broker] control_socket %s is used\n",
		    cmd, path, errs.msgs[0], errs.n > 1 ? ", ..." : "", p);
	else if (errs.n > 0)
		fprintf(stderr,
		    "egressctl: %s: note: %s is invalid (%s%s) and "
		    "has no valid [broker] control_socket line; using the "
		    "default %s\n",
		    cmd, path, errs.msgs[0], errs.n > 1 ? ", ..." : "", p);
	conf_errors_done(&errs);
	return p;
}

int
ctl_status_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	const char *cmd = argv[0], *sock = NULL, *name = NULL;
	char line[256], *cfgsock = NULL;
	struct reply r = { NULL, 0, -1 };
	json_t *doc = NULL, *insts = NULL;
	int i, json = 0, rc = CTL_EXIT_ERROR, metrics, need_name, cmdi = -1;

	metrics = strcmp(cmd, "metrics") == 0;
	need_name = strcmp(cmd, "instance") == 0 ||
	    strcmp(cmd, "grants") == 0 || strcmp(cmd, "attach") == 0;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			usage(stdout, cmd);
			return CTL_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0 &&
		    (metrics || strcmp(cmd, "attach") == 0)) {
			fprintf(stderr,
			    "egressctl: %s: --json is not supported%s"
			    "\n",
			    cmd,
			    metrics ? " (metrics prints the "
				      "Prometheus text exposition)" :
				      "");
			usage(stderr, cmd);
			return CTL_EXIT_USAGE;
		} else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--socket") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr,
				    "egressctl: %s: --socket needs "
				    "a PATH\n",
				    cmd);
				usage(stderr, cmd);
				return CTL_EXIT_USAGE;
			}
			sock = argv[++i];
		} else if (strcmp(argv[i], "--") == 0 &&
		    strcmp(cmd, "attach") == 0) {
			cmdi = i + 1;
			break;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "egressctl: %s: unknown option '%s'\n",
			    cmd, argv[i]);
			usage(stderr, cmd);
			return CTL_EXIT_USAGE;
		} else if (need_name && name == NULL)
			name = argv[i];
		else {
			fprintf(stderr,
			    "egressctl: %s: unexpected argument "
			    "'%s'\n",
			    cmd, argv[i]);
			usage(stderr, cmd);
			return CTL_EXIT_USAGE;
		}
	}
	if (need_name && name == NULL) {
		fprintf(stderr, "egressctl: %s: missing NAME\n", cmd);
		usage(stderr, cmd);
		return CTL_EXIT_USAGE;
	}
	if (cmdi >= 0 && cmdi >= argc) {
		fprintf(stderr,
		    "egressctl: attach: missing COMMAND after "
		    "--\n");
		usage(stderr, cmd);
		return CTL_EXIT_USAGE;
	}
	if (name != NULL &&
	    (strlen(name) > CONF_NAME_MAX ||
		strpbrk(name, " \t\r\n") != NULL)) {
		fprintf(stderr,
		    "egressctl: %s: '%s': not an instance name "
		    "(1 to %d bytes, no blank)\n",
		    cmd, name, CONF_NAME_MAX);
		return CTL_EXIT_USAGE;
	}
	if (sock == NULL &&
	    (sock = cfgsock = socket_from_config(cmd, ctx->config_path)) ==
		NULL)
		sock = STATUS_DEFAULT_SOCKET;
	if (strcmp(cmd, "status") == 0 || strcmp(cmd, "instances") == 0 ||
	    metrics)
		(void)snprintf(line, sizeof(line), "show %s\n", cmd);
	else if (strcmp(cmd, "attach") == 0)
		(void)snprintf(line, sizeof(line), "attach %s\n", name);
	else
		(void)snprintf(line, sizeof(line), "show %s %s\n", cmd, name);
	if (status_request(sock, line, metrics, &r) != 0) {
		int e = errno;

		fprintf(stderr,
		    "egressctl: cannot reach the broker at %s: %s\n", sock,
		    e == ENOENT ?
			"the socket does not exist (is "
			"egressd running? the path is --socket PATH, else "
			"[broker] control_socket)" :
			strerror(e));
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
		const char *code = sval(doc, "code");

		if (json)
			fputs(r.buf, stdout);
		else if (name != NULL && strcmp(code, "not-found") == 0)
			fprintf(stderr,
			    "egressctl: %s: no instance %s in the "
			    "running broker's configuration (see egressctl "
			    "instances)\n",
			    cmd, name);
		else
			fprintf(stderr, "egressctl: %s: the broker says: %s\n",
			    cmd, sval(doc, "error"));
		rc = strcmp(code, "not-found") == 0 ?
		    CTL_EXIT_NO :
		    CTL_EXIT_ERROR;
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
			       "bound to %s\n",
			    name);
			goto out;
		}
		if (r.fd != 3) {
			if (dup2(r.fd, 3) != 3)
				goto out;
			(void)close(r.fd);
		}
		r.fd = -1;
		(void)setenv("EGRESS_FD", "3", 1);
		(void)fflush(stdout);
		execvp(argv[cmdi], argv + cmdi);
		fprintf(stderr, "egressctl: %s: %s\n", argv[cmdi],
		    strerror(errno));
		rc = CTL_EXIT_ERROR;
		goto out;
	}
	if (json)
		fputs(r.buf, stdout);
	else if (strcmp(cmd, "status") == 0) {
		struct reply ri = { NULL, 0, -1 };

		if (status_request(sock, "show instances\n", 0, &ri) == 0)
			insts = json_loads(ri.buf, 0, NULL);
		free(ri.buf);
		if (ri.fd >= 0)
			(void)close(ri.fd);
		if (insts != NULL &&
		    !json_is_array(json_object_get(insts, "instances"))) {
			json_decref(insts);
			insts = NULL;
		}
		print_status(doc, insts);
	} else if (strcmp(cmd, "instances") == 0)
		print_instances(doc);
	else if (strcmp(cmd, "instance") == 0)
		print_instance(doc);
	else
		print_grants(doc);
out:
	json_decref(insts);
	json_decref(doc);
	free(r.buf);
	if (r.fd >= 0)
		(void)close(r.fd);
	free(cfgsock);
	return rc;
}

/* The instances a loaded configuration refuses, one line each. */
static void
print_refused(json_t *a)
{
	json_t *v;
	size_t i;

	json_array_foreach(a, i, v)
		printf("refused: %s (%s): %s\n", sval(v, "instance"),
		    sval(v, "entry"), sval(v, "error"));
}

int
ctl_reload_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	const char *sock = NULL;
	char *cfgsock = NULL;
	struct reply r = { NULL, 0, -1 };
	json_t *doc = NULL, *v;
	int i, json = 0, rc = CTL_EXIT_ERROR;
	size_t k;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			usage(stdout, "reload");
			return CTL_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			sock = argv[++i];
		else {
			fprintf(stderr, "egressctl: reload: %s '%s'\n",
			    argv[i][0] == '-' ?
				strcmp(argv[i], "--socket") == 0 ?
				"a PATH must follow" :
				"unknown option" :
				"unexpected argument",
			    argv[i]);
			usage(stderr, "reload");
			return CTL_EXIT_USAGE;
		}
	}
	if (sock == NULL &&
	    (sock = cfgsock = socket_from_config("reload",
		 ctx->config_path)) == NULL)
		sock = STATUS_DEFAULT_SOCKET;
	if (status_request(sock, "reload\n", 0, &r) != 0) {
		fprintf(stderr,
		    "egressctl: reload: cannot reach the broker at "
		    "%s: %s\n",
		    sock, strerror(errno));
		goto out;
	}
	if ((doc = json_loads(r.buf, 0, NULL)) == NULL) {
		fprintf(stderr,
		    "egressctl: reload: the broker's reply is not "
		    "JSON\n");
		goto out;
	}
	if (json)
		fputs(r.buf, stdout);
	if (json_is_true(json_object_get(doc, "reloaded"))) {
		if (!json)
			printf("reloaded: generation %lld, %lld instances\n",
			    ival(doc, "generation"), ival(doc, "instances"));
		if (!json)
			print_refused(json_object_get(doc, "refused"));
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (strcmp(sval(doc, "code"), "failed") != 0) {
		if (!json)
			fprintf(stderr,
			    "egressctl: reload: the broker says: "
			    "%s\n",
			    sval(doc, "error"));
		goto out;
	}
	if (!json) {
		fprintf(stderr,
		    "egressctl: reload: %s is invalid; the broker "
		    "serves nothing until it is fixed:\n",
		    sval(doc, "path"));
		json_array_foreach(json_object_get(doc, "errors"), k, v)
			fprintf(stderr, "%s\n", json_string_value(v));
	}
	rc = CTL_EXIT_CONFIG;
out:
	json_decref(doc);
	free(r.buf);
	if (r.fd >= 0)
		(void)close(r.fd);
	free(cfgsock);
	return rc;
}
