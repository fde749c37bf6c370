/* SPDX-License-Identifier: ISC */
/*
 * netaddr_probe: a test driver for broker/netaddr. It watches this host's
 * interface addresses with netaddr_new() on a libevent loop and prints one
 * line per state (the first, then one after each change):
 *   gen=N n=K addrs=A,B,... ADDR=CLASS ...
 * where each ADDR given on the command line is classified with
 * policy_addr_classify() against the current set (loopback, public, ...).
 * followed by " unknown" when the set is unknown (netaddr_own() refuses)
 * and " nets=N". With NETADDR_PROBE_NOSEND=1 in the environment, every
 * sendto()/sendmsg() fails with EPERM once the first set is read, so the
 * next re-read fails (as a netlink error would make it). It runs until
 * SIGTERM or SIGINT. Used by tests/integ/netaddr.sh.
 */
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "broker/net/netaddr.h"
#include "policy/policy.h"

static int probe_argc;
static char **probe_argv;

static const char *
class_name(unsigned c)
{
	if (c & POLICY_CLASS_METADATA)
		return "metadata";
	if (c & POLICY_CLASS_RESERVED)
		return "reserved";
	if (c & POLICY_CLASS_LOOPBACK)
		return "loopback";
	if (c & POLICY_CLASS_PRIVATE)
		return "private";
	if (c & POLICY_CLASS_PUBLIC)
		return "public";
	return "none";
}

static void
print_state(const struct netaddr *na)
{
	struct policy_classify_ctx ctx;
	struct policy_addr a;
	char buf[64];
	size_t i, n;
	const struct policy_addr *v = netaddr_addrs(na, &n);
	int k;

	printf("gen=%llu n=%zu addrs=",
	    (unsigned long long)netaddr_generation(na), n);
	for (i = 0; i < n; i++) {
		if (policy_addr_format(&v[i], buf, sizeof(buf)) != 0)
			(void)strcpy(buf, "?");
		printf("%s%s", i ? "," : "", buf);
	}
	memset(&ctx, 0, sizeof(ctx));
	if (netaddr_own(na, &ctx) != 0)
		printf(" unknown");
	printf(" nets=%zu", ctx.nnets);
	for (k = 0; k < probe_argc; k++) {
		if (policy_addr_parse(probe_argv[k], &a) != 0) {
			printf(" %s=invalid", probe_argv[k]);
			continue;
		}
		printf(" %s=%s", probe_argv[k],
		    class_name(policy_addr_classify(&ctx, &a)));
	}
	printf("\n");
	(void)fflush(stdout);
}

static void
on_change(void *arg, const struct netaddr *na)
{
	print_state(na);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)event_base_loopexit(arg, NULL);
}

/* Make every later netlink request fail: the re-reads send one. */
static int
deny_sends(void)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
	int rc = -1;

	if (c != NULL &&
	    seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sendto), 0) ==
		0 &&
	    seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sendmsg), 0) ==
		0 &&
	    seccomp_load(c) == 0)
		rc = 0;
	seccomp_release(c);
	return rc;
}

int
main(int argc, char **argv)
{
	struct event_base *base;
	struct event *sterm, *sint;
	struct netaddr *na = NULL;
	int err;

	probe_argc = argc - 1;
	probe_argv = argv + 1;
	if ((base = event_base_new()) == NULL)
		return 2;
	err = netaddr_new(base, on_change, NULL, &na);
	if (err != 0) {
		fprintf(stderr, "netaddr_probe: netaddr_new: %d\n", err);
		return 2;
	}
	sterm = evsignal_new(base, SIGTERM, on_signal, base);
	sint = evsignal_new(base, SIGINT, on_signal, base);
	if (sterm == NULL || sint == NULL || evsignal_add(sterm, NULL) != 0 ||
	    evsignal_add(sint, NULL) != 0)
		return 2;
	print_state(na);
	if (getenv("NETADDR_PROBE_NOSEND") != NULL && deny_sends() != 0) {
		fprintf(stderr, "netaddr_probe: cannot install the filter\n");
		return 2;
	}
	(void)event_base_dispatch(base);
	netaddr_free(na);
	event_free(sterm);
	event_free(sint);
	event_base_free(base);
	return 0;
}
