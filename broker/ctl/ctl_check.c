/* SPDX-License-Identifier: ISC */
/*
 * `egressctl check`: run the verdict for one instance and destination
 * exactly as the broker would, without connecting. Answers come from
 * --resolve (as curl's option does) or from c-ares with the configured
 * resolver; IP-literal hosts are their own answer. Every decision is made
 * by policy/; this file only gathers inputs and prints the result.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/net/decide.h"
#include "broker/net/dns.h"
#include "broker/net/netaddr.h"
#include "conf/conf.h"
#include "policy/policy.h"

#define CHECK_RESOLVE_MAX 32

struct check_resolve {
	struct policy_host host;
	size_t naddrs;
	struct policy_addr addrs[POLICY_ANSWERS_MAX];
};

static void
check_usage(FILE *f)
{
	fprintf(f,
	    "usage: egressctl [-c FILE] check [--transport "
	    "http|websocket|tcp|tls]\n"
	    "           [--resolve HOST=ADDR[,ADDR...]]... [--json] "
	    "INSTANCE DESTINATION\n");
}

/* Parse one "HOST=ADDR[,ADDR...]" (empty after '=' means no address). */
static int
check_resolve_parse(const char *arg, struct check_resolve *r)
{
	const char *eq = strchr(arg, '=');
	struct policy_err err;
	char *list = NULL, *tok, *save = NULL;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (eq == NULL) {
		fprintf(stderr,
		    "egressctl: --resolve '%s': expected "
		    "HOST=ADDR[,ADDR...]\n",
		    arg);
		return -1;
	}
	if (policy_host_parse(arg, (size_t)(eq - arg), &r->host, &err) != 0) {
		fprintf(stderr, "egressctl: --resolve '%s': %s\n", arg,
		    err.msg);
		return -1;
	}
	if ((list = strdup(eq + 1)) == NULL)
		goto out;
	for (tok = strtok_r(list, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		struct policy_addr *a;

		if (r->naddrs == POLICY_ANSWERS_MAX) {
			fprintf(stderr,
			    "egressctl: --resolve '%s': more than "
			    "%d addresses\n",
			    arg, POLICY_ANSWERS_MAX);
			goto out;
		}
		a = &r->addrs[r->naddrs];
		memset(a, 0, sizeof(*a));
		if (inet_pton(AF_INET, tok, a->bytes) == 1)
			a->family = 4;
		else if (inet_pton(AF_INET6, tok, a->bytes) == 1)
			a->family = 6;
		else {
			fprintf(stderr,
			    "egressctl: --resolve '%s': '%s' is "
			    "not an IPv4 or IPv6 address\n",
			    arg, tok);
			goto out;
		}
		r->naddrs++;
	}
	rc = 0;
out:
	free(list);
	return rc;
}

static const char *
check_addrs_str(const struct policy_addr *v, size_t n, char *buf, size_t len)
{
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		char a[64];

		if (policy_addr_format(&v[i], a, sizeof(a)) < 0)
			(void)snprintf(a, sizeof(a), "?");
		if (off + strlen(a) + 2 > len)
			break;
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i ? "," : "", a);
	}
	return buf;
}

/* Print the verdict: reason NULL is allow (to v's addresses). */
/* The policy of the file read, and this host's addresses. */
struct check_policy {
	const struct policy_instance *instance;
	const struct policy_nat64_list *nat64;
	struct netaddr *own; /* NULL: unknown (the decision refuses) */
};

/* As the broker's: no own-address set, no policy (policy-unavailable). */
static int
check_policy(void *arg, int answers, struct decide_policy *ret)
{
	const struct check_policy *p = arg;
	struct policy_classify_ctx ctx;
	int err;

	memset(&ctx, 0, sizeof(ctx));
	if ((err = netaddr_own(p->own, &ctx)) != 0)
		return err;
	ret->instance = p->instance;
	ret->nat64 = p->nat64;
	ret->local = ctx.local;
	ret->nlocal = ctx.nlocal;
	ret->nets = ctx.nets;
	ret->nnets = ctx.nnets;
	return 0;
}

static int
check_print(int json, const char *instance, enum policy_transport transport,
    const struct policy_dest *dest, const char *reason,
    const struct policy_verdict *v)
{
	int allow = reason == NULL && v != NULL; /* no verdict: deny */

	if (json) {
		json_t *o, *addrs;
		char *s;
		size_t i;

		o = json_object();
		addrs = json_array();
		if (o == NULL || addrs == NULL)
			return CTL_EXIT_ERROR;
		for (i = 0; allow && i < v->naddrs; i++) {
			char a[64];

			if (policy_addr_format(&v->addrs[i], a, sizeof(a)) ==
			    0)
				json_array_append_new(addrs, json_string(a));
		}
		json_object_set_new(o, "verdict",
		    json_string(allow ? "allow" : "deny"));
		json_object_set_new(o, "reason",
		    allow ? json_null() : json_string(reason));
		json_object_set_new(o, "instance", json_string(instance));
		json_object_set_new(o, "transport",
		    json_string(policy_transport_name(transport)));
		json_object_set_new(o, "host",
		    dest ? json_string(dest->host.name) : json_null());
		json_object_set_new(o, "port",
		    dest ? json_integer(dest->port) : json_null());
		json_object_set_new(o, "addresses", addrs);
		s = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (s == NULL)
			return CTL_EXIT_ERROR;
		printf("%s\n", s);
		free(s);
	} else if (allow) {
		char buf[POLICY_ANSWERS_MAX * 48];

		printf("allow %s %s\n", dest->host.name,
		    check_addrs_str(v->addrs, v->naddrs, buf, sizeof(buf)));
	} else
		printf("deny %s\n", reason);
	return allow ? CTL_EXIT_OK : CTL_EXIT_NO;
}

int
ctl_check_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "resolve", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct check_resolve *resolves = NULL;
	size_t nresolves = 0, i;
	struct conf_snapshot *snap = NULL;
	struct conf_errors errs = { 0 };
	const struct conf_instance *ci;
	struct policy_dest dest;
	struct policy_err perr;
	struct check_policy pol = { 0 };
	const struct decide_result *res;
	struct decide *d = NULL;
	int transport = 0, json = 0, ch, rc = CTL_EXIT_USAGE, r;
	const char *config = ctx->config_path, *instance, *destination;

	resolves = calloc(CHECK_RESOLVE_MAX, sizeof(*resolves));
	d = calloc(1, sizeof(*d));
	if (resolves == NULL || d == NULL)
		goto out;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "+c:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			transport = policy_transport_parse(optarg);
			if (transport < 0) {
				fprintf(stderr,
				    "egressctl: --transport '%s': "
				    "expected http, websocket, tcp or tls\n",
				    optarg);
				goto out;
			}
			break;
		case 'r':
			if (nresolves == CHECK_RESOLVE_MAX) {
				fprintf(stderr,
				    "egressctl: more than %d "
				    "--resolve options\n",
				    CHECK_RESOLVE_MAX);
				goto out;
			}
			if (check_resolve_parse(optarg,
				&resolves[nresolves]) != 0)
				goto out;
			nresolves++;
			break;
		case 'j':
			json = 1;
			break;
		case 'c':
			config = optarg;
			break;
		case 'h':
			check_usage(stdout);
			rc = CTL_EXIT_OK;
			goto out;
		default:
			check_usage(stderr);
			goto out;
		}
	}
	if (argc - optind != 2) {
		check_usage(stderr);
		goto out;
	}
	instance = argv[optind];
	destination = argv[optind + 1];

	if (ctl_conf_load(config, &snap) != 0) {
		rc = CTL_EXIT_CONFIG;
		goto out;
	}

	/* Parse the destination. A transport that contradicts the URL, or a
	 * HOST:PORT without tcp/tls, is a usage error; a destination that
	 * does not parse is the verdict invalid-destination. */
	if (transport == POLICY_TRANSPORT_TCP ||
	    transport == POLICY_TRANSPORT_TLS) {
		if (strstr(destination, "://") != NULL) {
			fprintf(stderr,
			    "egressctl: --transport %s takes "
			    "HOST:PORT, not a URL\n",
			    policy_transport_name(transport));
			goto out;
		}
		r = policy_hostport_parse(destination, strlen(destination),
		    &dest, &perr);
	} else {
		r = policy_url_parse(destination, strlen(destination), &dest,
		    &perr);
		if (r == 0) {
			int implied = (strcmp(dest.scheme, "ws") == 0 ||
					  strcmp(dest.scheme, "wss") == 0) ?
			    POLICY_TRANSPORT_WEBSOCKET :
			    POLICY_TRANSPORT_HTTP;

			if (transport != 0 && transport != implied) {
				fprintf(stderr,
				    "egressctl: --transport %s "
				    "contradicts the scheme %s://\n",
				    policy_transport_name(transport),
				    dest.scheme);
				goto out;
			}
			transport = implied;
		} else if (transport == 0)
			transport = POLICY_TRANSPORT_HTTP;
	}
	if (r != 0) {
		fprintf(stderr, "egressctl: %s: %s\n", destination, perr.msg);
		rc = check_print(json, instance, transport, NULL,
		    policy_reason_str(POLICY_REASON_INVALID_DESTINATION),
		    NULL);
		goto out;
	}

	ci = conf_instance_find(snap, instance);
	if (ci != NULL && ci->manifest == NULL && ci->manifest_error != NULL)
		fprintf(stderr,
		    "egressctl: instance %s: manifest refused: "
		    "%s\n",
		    instance, ci->manifest_error);
	if ((r = netaddr_read(&pol.own)) != 0)
		fprintf(stderr,
		    "egressctl: cannot read this host's addresses and local "
		    "routes (netlink: %s); the decision is "
		    "policy-unavailable\n",
		    egress_strerror(r));
	pol.instance = ci != NULL ? &ci->policy : NULL;
	pol.nat64 = &snap->nat64;

	/* The answer set: the literal itself, --resolve, or the resolver,
	 * through the one decision the broker makes. */
	for (i = 0; i < nresolves; i++)
		if (strcmp(resolves[i].host.name, dest.host.name) == 0)
			break;
	r = decide_run_sync(d, transport, &dest, check_policy, &pol,
	    (const char *const *)snap->resolver_servers,
	    snap->nresolver_servers, (int)snap->resolver_timeout_ms,
	    i < nresolves ? resolves[i].addrs : NULL,
	    i < nresolves ? resolves[i].naddrs : 0);
	if (r != 0) {
		fprintf(stderr, "egressctl: resolving %s: %s\n",
		    dest.host.name, egress_strerror(r));
		goto out;
	}
	res = decide_result(d);
	if (res->invalid)
		goto out;
	/* No usable answer is no answer: the verdict is unresolvable. Say
	 * why a resolver failed. */
	if (res->resolved && res->dns != DNS_OK &&
	    dns_status_error(res->dns) != EGRESS_ERR_NOT_FOUND)
		fprintf(stderr, "egressctl: resolving %s: %s\n",
		    dest.host.name, dns_status_str(res->dns));
	rc = check_print(json, instance, transport, &dest, res->reason,
	    res->verdict);
out:
	conf_errors_done(&errs);
	conf_snapshot_free(snap);
	netaddr_free(pol.own);
	free(resolves);
	free(d);
	return rc;
}
