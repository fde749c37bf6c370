/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/alisten: which descriptors are taken (listening
 * TCP on loopback only, of another network namespace than the broker's:
 * the tests make one, as root), the caps per attach, per instance and
 * in all, a connection accepted on an attached listener reaching the
 * callback with the instance, and detach and reconcile closing the
 * listeners with one logged event each.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <egress/error.h>
#include <event2/event.h>

#include "broker/alisten.h"
#include "broker/broker.h"
#include "broker/log.h"
#include "conf/conf.h"

static struct event_base *base;
static struct alisten *A;
static int logfd[2] = { -1, -1 };
static char accepted[CONF_NAME_MAX + 1];
static int naccepted;

static void
on_accept(void *arg, int fd, const char *instance)
{
	(void)snprintf(accepted, sizeof(accepted), "%s", instance);
	naccepted++;
	(void)close(fd);
}

/* The test's own network namespace (the broker's) and a second one with
 * lo up, where launchers' listeners live, as egress-sandbox --net's do. */
static int ns_own = -1, ns_other = -1;

static void
ns_enter(int ns)
{
	cr_assert_eq(setns(ns, CLONE_NEWNET), 0, "setns: %s", strerror(errno));
}

static void
ns_make_other(void)
{
	struct ifreq ifr;
	int s;

	if (geteuid() != 0)
		cr_skip_test("needs root for a network namespace");
	ns_own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert(ns_own >= 0);
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %s", strerror(errno));
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(s >= 0);
	memset(&ifr, 0, sizeof(ifr));
	(void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	cr_assert_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	cr_assert_eq(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
	(void)close(s);
	ns_other = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert(ns_other >= 0);
	ns_enter(ns_own);
}

/* socket() in the other namespace (its address and connections stay
 * there, whichever namespace the test is in). */
static int
other_socket(int af, int type)
{
	int fd;

	ns_enter(ns_other);
	fd = socket(af, type | SOCK_CLOEXEC, 0);
	ns_enter(ns_own);
	cr_assert(fd >= 0);
	return fd;
}

static void
setup(void)
{
	ns_make_other();
	base = broker_base_new(); /* as the daemon's: changes kept a turn */
	cr_assert(base != NULL);
	cr_assert_eq(alisten_new(base, on_accept, NULL, &A), 0);
	cr_assert_eq(pipe2(logfd, O_CLOEXEC | O_NONBLOCK), 0);
	log_set_fd(logfd[1]);
	naccepted = 0;
	accepted[0] = '\0';
}

static void
teardown(void)
{
	(void)close(ns_own);
	(void)close(ns_other);
	alisten_free(A);
	event_base_free(base);
	log_set_fd(-1);
	(void)close(logfd[0]);
	(void)close(logfd[1]);
}

/* Everything logged since the last call. */
static const char *
logged(void)
{
	static char buf[65536];
	ssize_t n = read(logfd[0], buf, sizeof(buf) - 1);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* A TCP socket of the other namespace on addr (127.0.0.1 by default)
 * port 0; listening or not. */
static int
tcp_sock(int af, int do_listen, const char *v4)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	int fd = other_socket(af, SOCK_STREAM);

	cr_assert(fd >= 0);
	memset(&in, 0, sizeof(in));
	memset(&in6, 0, sizeof(in6));
	in.sin_family = AF_INET;
	in.sin_addr.s_addr = v4 != NULL ?
	    inet_addr(v4) :
	    htonl(INADDR_LOOPBACK);
	in6.sin6_family = AF_INET6;
	in6.sin6_addr = in6addr_loopback;
	if (af == AF_INET)
		cr_assert_eq(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	else if (bind(fd, (struct sockaddr *)&in6, sizeof(in6)) != 0) {
		(void)close(fd);
		return -1; /* no IPv6 here */
	}
	if (do_listen)
		cr_assert_eq(listen(fd, 8), 0);
	return fd;
}

static int
fd_is_closed(int fd)
{
	return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

Test(broker_alisten, refuses_what_is_not_a_loopback_listener, .init = setup,
    .fini = teardown)
{
	const char *msg = NULL;
	uint64_t id = 0;
	int fds[2];

	fds[0] = tcp_sock(AF_INET, 0, NULL); /* bound, not listening */
	cr_assert_eq(alisten_attach(A, "weather", fds, 1, &id, &msg),
	    EGRESS_ERR_INVALID);
	cr_assert_str_eq(msg, "not a listening TCP socket on loopback");
	cr_assert(fd_is_closed(fds[0]));
	fds[0] = tcp_sock(AF_INET, 1, "0.0.0.0"); /* every address */
	cr_assert_eq(alisten_attach(A, "weather", fds, 1, &id, &msg),
	    EGRESS_ERR_INVALID);
	/* A loopback listener of the broker's own namespace: every local
	 * user could reach it, without a token. */
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(fds[0],
			 (struct sockaddr *)&(struct sockaddr_in){
			     .sin_family = AF_INET,
			     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
			 sizeof(struct sockaddr_in)),
	    0);
	cr_assert_eq(listen(fds[0], 8), 0);
	cr_assert_eq(alisten_attach(A, "weather", fds, 1, &id, &msg),
	    EGRESS_ERR_INVALID);
	cr_assert_str_eq(msg,
	    "a listener in the broker's own network "
	    "namespace");
	cr_assert(fd_is_closed(fds[0]));
	fds[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(alisten_attach(A, "weather", fds, 1, &id, &msg),
	    EGRESS_ERR_INVALID);
	fds[0] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* An abstract address of its own (sa_family alone: autobind). */
	cr_assert_eq(bind(fds[0], (struct sockaddr *)&(sa_family_t){ AF_UNIX },
			 sizeof(sa_family_t)),
	    0);
	cr_assert_eq(listen(fds[0], 1), 0);
	cr_assert_eq(alisten_attach(A, "weather", fds, 1, &id, &msg),
	    EGRESS_ERR_INVALID);
	/* One good, one bad: nothing is taken, both are closed. */
	fds[0] = tcp_sock(AF_INET, 1, NULL);
	fds[1] = dup(0);
	cr_assert_eq(alisten_attach(A, "weather", fds, 2, &id, &msg),
	    EGRESS_ERR_INVALID);
	cr_assert(fd_is_closed(fds[0]) && fd_is_closed(fds[1]));
	cr_assert_eq(alisten_attach(A, "weather", fds, 0, &id, &msg),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(alisten_count(A, NULL), 0);
	cr_assert_eq(id, 0);
}

Test(broker_alisten, accepts_into_the_instance, .init = setup,
    .fini = teardown)
{
	struct sockaddr_in in;
	socklen_t sl = sizeof(in);
	const char *msg = NULL;
	uint64_t id = 0;
	int fds[2], c;
	size_t n = 1;

	fds[0] = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(getsockname(fds[0], (struct sockaddr *)&in, &sl), 0);
	if ((fds[1] = tcp_sock(AF_INET6, 1, NULL)) >= 0)
		n = 2;
	cr_assert_eq(alisten_attach(A, "weather", fds, n, &id, &msg), 0);
	cr_assert_neq(id, 0);
	cr_assert_eq(alisten_count(A, "weather"), n);
	cr_assert(strstr(logged(), "\"status\":\"attached\"") != NULL);
	c = other_socket(AF_INET, SOCK_STREAM);
	cr_assert_eq(connect(c, (struct sockaddr *)&in, sizeof(in)), 0);
	while (naccepted == 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_str_eq(accepted, "weather");
	(void)close(c);
	/* Detached: logged once, and the port accepts no more. */
	alisten_detach(A, id, "the control connection closed");
	alisten_detach(A, id, "again: a no-op");
	cr_assert_eq(alisten_count(A, NULL), 0);
	cr_assert(strstr(logged(),
		      "\"status\":\"closed\",\"instance\":\"weather\"") !=
	    NULL);
	cr_assert_str_eq(logged(), "");
	(void)event_base_loop(base, EVLOOP_NONBLOCK); /* closed by now */
	c = other_socket(AF_INET, SOCK_STREAM);
	cr_assert_eq(connect(c, (struct sockaddr *)&in, sizeof(in)), -1);
	cr_assert_eq(errno, ECONNREFUSED);
	(void)close(c);
}

Test(broker_alisten, caps, .init = setup, .fini = teardown)
{
	const char *msg = NULL;
	char name[32];
	uint64_t id;
	int fds[ALISTEN_PER_ATTACH + 1];
	size_t i, k;

	for (i = 0; i <= ALISTEN_PER_ATTACH; i++)
		fds[i] = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(alisten_attach(A, "weather", fds, ALISTEN_PER_ATTACH + 1,
			 &id, &msg),
	    EGRESS_ERR_INVALID);
	/* Fill every instance up to its cap, and the total. */
	for (k = 0; k * ALISTEN_PER_INSTANCE < ALISTEN_MAX; k++) {
		(void)snprintf(name, sizeof(name), "inst%zu", k);
		for (i = 0; i < ALISTEN_PER_INSTANCE / ALISTEN_PER_ATTACH;
		     i++) {
			size_t j;

			for (j = 0; j < ALISTEN_PER_ATTACH; j++)
				fds[j] = tcp_sock(AF_INET, 1, NULL);
			cr_assert_eq(alisten_attach(A, name, fds,
					 ALISTEN_PER_ATTACH, &id, &msg),
			    0);
		}
		fds[0] = tcp_sock(AF_INET, 1, NULL);
		cr_assert_eq(alisten_attach(A, name, fds, 1, &id, &msg),
		    EGRESS_ERR_TOO_BIG);
		cr_assert_str_eq(msg, "too many listeners for this instance");
		cr_assert(fd_is_closed(fds[0]));
	}
	cr_assert_eq(alisten_count(A, NULL), ALISTEN_MAX);
	fds[0] = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(alisten_attach(A, "another", fds, 1, &id, &msg),
	    EGRESS_ERR_TOO_BIG);
	cr_assert_str_eq(msg, "too many listeners");
	/* One group goes: room for one attach again. */
	alisten_detach(A, 1, "the control connection closed");
	fds[0] = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(alisten_attach(A, "another", fds, 1, &id, &msg), 0);
}

Test(broker_alisten, reconcile_closes_removed_instances, .init = setup,
    .fini = teardown)
{
	struct conf_errors errs = { 0, NULL };
	struct conf_snapshot *s = NULL;
	const char *msg = NULL;
	uint64_t id;
	int fd;

	cr_assert_eq(conf_load(SRCDIR "/examples/egressd.ini", &s, &errs), 0);
	fd = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(alisten_attach(A, "weather", &fd, 1, &id, &msg), 0);
	fd = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(alisten_attach(A, "removed", &fd, 1, &id, &msg), 0);
	(void)logged();
	alisten_reconcile(A, s);
	cr_assert_eq(alisten_count(A, "weather"), 1);
	cr_assert_eq(alisten_count(A, "removed"), 0);
	cr_assert(strstr(logged(),
		      "\"status\":\"closed\",\"instance\":\"removed\"") !=
	    NULL);
	conf_snapshot_free(s);
}

/* Is a file of inode ino watched by an epoll instance of this process?
 * (Each epoll descriptor's fdinfo lists its watched files' inodes.) */
static int
epoll_watches(unsigned long ino)
{
	char path[320], link[64], line[256];
	struct dirent *d;
	unsigned long i;
	int found = 0;
	DIR *dir = opendir("/proc/self/fd");
	FILE *f;
	ssize_t n;

	cr_assert(dir != NULL);
	while (!found && (d = readdir(dir)) != NULL) {
		(void)snprintf(path, sizeof(path), "/proc/self/fd/%s",
		    d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, "anon_inode:[eventpoll]") != 0)
			continue;
		(void)snprintf(path, sizeof(path), "/proc/self/fdinfo/%s",
		    d->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		while (!found && fgets(line, sizeof(line), f) != NULL) {
			const char *p = strstr(line, " ino:");
			char *end;

			if (strncmp(line, "tfd:", 4) != 0 || p == NULL)
				continue;
			errno = 0;
			i = strtoul(p + 5, &end, 16);
			if (errno == 0 && end != p + 5 && i == ino)
				found = 1;
		}
		(void)fclose(f);
	}
	(void)closedir(dir);
	return found;
}

/*
 * The launcher may keep its own copy of a listener it attached. Once
 * detached, the listener must not stay watched: a file still open
 * elsewhere stays in an epoll set until it is deleted there, and a
 * watched listener with connections waiting would wake the loop on
 * every turn.
 */
Test(broker_alisten,
    a_detached_listener_the_launcher_still_holds_is_not_watched, .init = setup,
    .fini = teardown)
{
	struct sockaddr_in in;
	socklen_t sl = sizeof(in);
	const char *msg = NULL;
	struct stat st;
	uint64_t id = 0;
	int fd, copy, c;

	fd = tcp_sock(AF_INET, 1, NULL);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&in, &sl), 0);
	copy = dup(fd); /* the launcher's */
	cr_assert(copy >= 0);
	cr_assert_eq(fstat(copy, &st), 0);
	cr_assert_eq(alisten_attach(A, "weather", &fd, 1, &id, &msg), 0);
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	cr_assert(epoll_watches((unsigned long)st.st_ino));
	alisten_detach(A, id, "the control connection closed");
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	cr_assert(fd_is_closed(fd));
	cr_assert_not(epoll_watches((unsigned long)st.st_ino),
	    "the detached listener is still watched");
	/* A connection waiting on the launcher's copy reaches nobody. */
	c = other_socket(AF_INET, SOCK_STREAM);
	cr_assert_eq(connect(c, (struct sockaddr *)&in, sizeof(in)), 0);
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	cr_assert_eq(naccepted, 0);
	(void)close(c);
	(void)close(copy);
}
