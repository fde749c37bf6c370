/* SPDX-License-Identifier: ISC */
/*
 * egress-sandbox --net: a network namespace with nothing in it but lo,
 * so the sandboxed program can reach no address and ask no DNS server;
 * its only way out is the broker's HTTP proxy front on
 * 127.0.0.1:3128 and [::1]:3128, whose listening sockets are opened here,
 * inside the namespace, and handed to the broker over the control socket
 * (`attach-listener INSTANCE`). The broker serves them for that instance
 * for as long as the control connection returned here stays open.
 *
 * DNS: /etc/resolv.conf is covered (a read-only bind mount, in a private
 * mount namespace) by a file naming only 192.0.2.1 (TEST-NET-1): with
 * only lo in the namespace it has no route, so a query fails at once
 * with ENETUNREACH whatever runs inside; no loopback address is named,
 * so nothing started inside can pose as the resolver (and glibc's
 * default without a nameserver line, 127.0.0.1, is not left in place).
 * The filter keeps socket(AF_UNIX) closed, so neither nscd nor
 * systemd-resolved's varlink socket can resolve names for it either.
 *
 * --inspect: the instance's TLS tunnels are terminated by the broker with
 * leaves of its inspection CA, whose certificate the attach-listener
 * reply carries. A bundle of the system's roots and that certificate
 * (mode 0444) covers the system's root bundle, read-only, in the private
 * mount namespace, and every common client is pointed at it; nothing of
 * it is on the host's disk. On a system without a root bundle, it is a
 * file in /tmp instead, removed when the command ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>

#include "broker/sandbox/sandbox.h"

#define SANDBOX_RESOLV	   "/etc/resolv.conf"
#define SANDBOX_CGROUP	   "/sys/fs/cgroup"
#define SANDBOX_LISTEN_MAX 2
#define SANDBOX_ROOTS_MAX  (16 * 1024 * 1024)

/* The system's root bundle: the first of these that is a file. */
static const char *const roots_paths[] = {
	"/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine */
	"/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
	"/etc/ssl/ca-bundle.pem",	      /* openSUSE */
	"/etc/ssl/cert.pem",		      /* BSDs, macOS-like layouts */
};

/* The variables the bundle is given in. */
static const char *const bundle_vars[] = { "SSL_CERT_FILE", "CURL_CA_BUNDLE",
	"REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
	"NODE_EXTRA_CA_CERTS" };

static char bundle_path[64]; /* the --inspect bundle's file in /tmp, if any */

static const char resolv_text[] =
    "# egress-sandbox --net: no DNS in this network namespace. Names\n"
    "# are resolved by egressd through the proxy (http_proxy); this\n"
    "# address has no route here.\n"
    "nameserver 192.0.2.1\n"
    "options attempts:1 timeout:1\n";

/* Write s to the file path (a /proc/self file); exit on failure. */
static void
write_proc(const char *path, const char *s)
{
	int fd;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		sandbox_die(EXIT_SANDBOX, path, strerror(errno));
	(void)close(fd);
}

/*
 * New network and mount namespaces: directly as root, else inside a new
 * user namespace that maps only the caller's own uid and gid. Return 1
 * when in a new user namespace, else 0.
 */
static int
net_unshare(int root)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWNET | CLONE_NEWNS) == 0)
		return 0;
	if (root || (errno != EPERM && errno != EACCES))
		sandbox_die(EXIT_SANDBOX,
		    "--net: cannot create a network namespace (needs "
		    "CAP_SYS_ADMIN; see docs/deployment.md)",
		    strerror(errno));
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0)
		sandbox_die(EXIT_SANDBOX,
		    "--net: not root, and no user namespace to create the "
		    "network namespace in (run as root, or see "
		    "docs/deployment.md)",
		    strerror(errno));
	write_proc("/proc/self/setgroups", "deny");
	(void)snprintf(map, sizeof(map), "%lu %lu 1", (unsigned long)uid,
	    (unsigned long)uid);
	write_proc("/proc/self/uid_map", map);
	(void)snprintf(map, sizeof(map), "%lu %lu 1", (unsigned long)gid,
	    (unsigned long)gid);
	write_proc("/proc/self/gid_map", map);
	return 1;
}

/* Bring lo up (it holds 127.0.0.1, and ::1 once up). */
static void
net_lo_up(void)
{
	struct ifreq ifr;
	int s;

	memset(&ifr, 0, sizeof(ifr));
	(void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		sandbox_die(EXIT_SANDBOX, "--net: lo", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		sandbox_die(EXIT_SANDBOX, "--net: bring lo up",
		    strerror(errno));
	(void)close(s);
}

/*
 * Cover /etc/resolv.conf, in this (private) mount namespace, with
 * resolv_text, read-only. The text goes to a new temporary file (in
 * sticky /tmp, where nobody else can rename or remove it), bound through
 * its descriptor and unlinked once mounted: no path is followed twice.
 */
static void
net_resolv(void)
{
	char tmp[] = "/tmp/egress-sandbox-resolv.XXXXXX", src[64];
	int fd;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		sandbox_die(EXIT_SANDBOX, "--net: private mount namespace",
		    strerror(errno));
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		sandbox_die(EXIT_SANDBOX, "--net: resolv.conf: mkstemp",
		    strerror(errno));
	if (write(fd, resolv_text, sizeof(resolv_text) - 1) !=
		(ssize_t)(sizeof(resolv_text) - 1) ||
	    fchmod(fd, 0444) != 0) {
		(void)unlink(tmp);
		sandbox_die(EXIT_SANDBOX, "--net: resolv.conf",
		    strerror(errno));
	}
	(void)snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (mount(src, SANDBOX_RESOLV, NULL, MS_BIND, NULL) != 0) {
		(void)unlink(tmp);
		sandbox_die(EXIT_SANDBOX,
		    "--net: cannot cover " SANDBOX_RESOLV
		    " (it must exist; a symlink must lead to a file)",
		    strerror(errno));
	}
	(void)unlink(tmp);
	if (mount(NULL, SANDBOX_RESOLV, NULL,
		MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
		    MS_NOEXEC,
		NULL) != 0)
		sandbox_die(EXIT_SANDBOX, "--net: read-only " SANDBOX_RESOLV,
		    strerror(errno));
	(void)close(fd);
}

/*
 * A read-only clone of the launcher's cgroup tree at SANDBOX_CGROUP, to
 * carry into the new /sys, or -1 when there is none to carry: only a
 * cgroup2 tree (cgroup v1's net_prio.ifpriomap lists the host's
 * interfaces, whatever namespace reads it). Exit when a clone cannot be
 * made read-only (a worker's uid may own cgroups outside the sandbox).
 */
static int
net_cgroup_clone(void)
{
	struct mount_attr ro = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
		    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
	};
	struct statfs sf;
	int cg;

	if (statfs(SANDBOX_CGROUP, &sf) != 0 ||
	    sf.f_type != CGROUP2_SUPER_MAGIC)
		return -1;
	if ((cg = open_tree(AT_FDCWD, SANDBOX_CGROUP,
		 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)) < 0)
		return -1;
	if (mount_setattr(cg, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro,
		sizeof(ro)) != 0)
		sandbox_die(EXIT_SANDBOX,
		    "--net: cannot make the cgroup tree read-only",
		    strerror(errno));
	return cg;
}

/*
 * Mount a sysfs of the new network namespace on /sys, read-only, in the
 * private mount namespace: the host's, left in place, would show every
 * interface of the host's namespace (/sys/class/net, their hardware
 * addresses and counters) to the program. A cgroup2 tree under it,
 * which runtimes read for their limits, is carried over, read-only
 * (net_cgroup_clone()). Where the kernel refuses a new sysfs (in a user
 * namespace whose /sys is not fully visible), an empty read-only tmpfs
 * covers /sys instead; where neither can be mounted, the sandbox does
 * not start.
 */
static void
net_sysfs(void)
{
	const unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY;
	int cg = net_cgroup_clone();

	if (mount("sysfs", "/sys", "sysfs", fl, NULL) == 0) {
		if (cg >= 0 &&
		    move_mount(cg, "", AT_FDCWD, SANDBOX_CGROUP,
			MOVE_MOUNT_F_EMPTY_PATH) != 0)
			(void)fprintf(stderr,
			    "egress-sandbox: --net: " SANDBOX_CGROUP
			    " not carried over: %s\n",
			    strerror(errno));
	} else if (mount("none", "/sys", "tmpfs", fl, "size=4k,mode=0555") ==
	    0)
		(void)fprintf(stderr,
		    "egress-sandbox: --net: no sysfs of the namespace (%s); "
		    "/sys is empty here\n",
		    strerror(errno));
	else
		sandbox_die(EXIT_SANDBOX,
		    "--net: cannot cover the host's /sys", strerror(errno));
	if (cg >= 0)
		(void)close(cg);
}

/*
 * A listening TCP socket on the loopback address of family af at
 * SANDBOX_PROXY_PORT, or -1 (errno set) when that family has none.
 */
static int
net_listener(int af)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	const struct sockaddr *sa;
	socklen_t sl;
	int fd, one = 1, saved;

	memset(&in, 0, sizeof(in));
	memset(&in6, 0, sizeof(in6));
	in.sin_family = AF_INET;
	in.sin_port = htons(SANDBOX_PROXY_PORT);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(SANDBOX_PROXY_PORT);
	in6.sin6_addr = in6addr_loopback;
	sa = af == AF_INET ? (const struct sockaddr *)&in :
			     (const struct sockaddr *)&in6;
	sl = af == AF_INET ? sizeof(in) : sizeof(in6);
	if ((fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP)) < 0)
		return -1;
	if ((af == AF_INET6 &&
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) !=
		    0) ||
	    bind(fd, sa, sl) != 0 || listen(fd, SOMAXCONN) != 0) {
		saved = errno;
		(void)close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* Copy the system's root bundle to fd; return its path, or NULL when
 * the system has none. */
static const char *
bundle_roots(int fd)
{
	char buf[65536];
	struct stat sb;
	size_t i, total = 0;
	ssize_t n;
	int in = -1;

	for (i = 0; i < sizeof(roots_paths) / sizeof(roots_paths[0]); i++) {
		if ((in = open(roots_paths[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if (fstat(in, &sb) == 0 && S_ISREG(sb.st_mode))
			break;
		(void)close(in);
		in = -1;
	}
	if (in < 0)
		return NULL;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		if (total > SANDBOX_ROOTS_MAX ||
		    write(fd, buf, (size_t)n) != n) {
			sandbox_net_leave();
			sandbox_die(EXIT_SANDBOX, "--inspect: the CA bundle",
			    total > SANDBOX_ROOTS_MAX ?
				"the system roots are over 16 MiB" :
				strerror(errno));
		}
	}
	if (n < 0 || write(fd, "\n", 1) != 1) {
		sandbox_net_leave();
		sandbox_die(EXIT_SANDBOX, "--inspect: the system roots",
		    strerror(errno));
	}
	(void)close(in);
	return roots_paths[i];
}

/*
 * Write the system roots and ca to a new file and point the clients'
 * variables at it. Where the system has a root bundle, the new file
 * covers it, read-only, in this (private) mount namespace, bound through
 * its descriptor and unlinked at once, as resolv.conf is: inside, the
 * system's own bundle also holds the inspection CA (so clients that read
 * it without a variable trust the CA too), and nothing is left on the
 * host even if this process is killed. Without a system bundle the file
 * stays in /tmp for the command's life; sandbox_net_leave() removes it.
 */
static void
bundle_write(const char *ca)
{
	const char *roots, *path;
	char src[64];
	size_t i;
	int fd;

	(void)snprintf(bundle_path, sizeof(bundle_path),
	    "/tmp/egress-sandbox-ca.XXXXXX");
	if ((fd = mkostemp(bundle_path, O_CLOEXEC)) < 0) {
		bundle_path[0] = '\0';
		sandbox_die(EXIT_SANDBOX, "--inspect: the CA bundle",
		    strerror(errno));
	}
	roots = bundle_roots(fd);
	if (write(fd, ca, strlen(ca)) != (ssize_t)strlen(ca) ||
	    fchmod(fd, 0444) != 0) {
		sandbox_net_leave();
		sandbox_die(EXIT_SANDBOX, "--inspect: the CA bundle",
		    strerror(errno));
	}
	path = bundle_path;
	if (roots != NULL) {
		(void)snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
		if (mount(src, roots, NULL, MS_BIND, NULL) != 0 ||
		    mount(NULL, roots, NULL,
			MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID |
			    MS_NODEV | MS_NOEXEC,
			NULL) != 0) {
			sandbox_net_leave();
			sandbox_die(EXIT_SANDBOX,
			    "--inspect: cannot cover the system roots",
			    strerror(errno));
		}
		sandbox_net_leave();
		path = roots;
	}
	(void)close(fd);
	for (i = 0; i < sizeof(bundle_vars) / sizeof(bundle_vars[0]); i++)
		if (setenv(bundle_vars[i], path, 1) != 0)
			sandbox_die(EXIT_SANDBOX, "setenv", strerror(errno));
}

void
sandbox_net_leave(void)
{
	if (bundle_path[0] != '\0')
		(void)unlink(bundle_path);
	bundle_path[0] = '\0';
}

int
sandbox_net_enter(const char *control, const char *instance, int root,
    int inspect, int *ret_userns)
{
	char *ca = NULL;
	static const char *const unset[] = { "no_proxy", "NO_PROXY",
		"EGRESS_FD" };
	static const char *const set[] = { "http_proxy", "https_proxy",
		"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY" };
	int fds[SANDBOX_LISTEN_MAX], cfd;
	char req[128];
	size_t n = 0, i;

	if (snprintf(req, sizeof(req), "attach-listener %s\n", instance) >=
	    (int)sizeof(req))
		sandbox_die(EXIT_USAGE, "instance name too long", NULL);
	*ret_userns = net_unshare(root);
	net_lo_up();
	net_resolv();
	net_sysfs();
	if ((fds[n] = net_listener(AF_INET)) < 0)
		sandbox_die(EXIT_SANDBOX, "--net: listen on 127.0.0.1:3128",
		    strerror(errno));
	n++;
	if ((fds[n] = net_listener(AF_INET6)) >= 0)
		n++;
	else
		(void)fprintf(stderr,
		    "egress-sandbox: no IPv6 loopback (%s): the proxy "
		    "listens on 127.0.0.1 only\n",
		    strerror(errno));
	cfd = sandbox_control(control, req, fds, n, "attached_listener", NULL,
	    inspect ? &ca : NULL);
	if (inspect && ca == NULL)
		sandbox_die(EXIT_ATTACH, "--inspect",
		    "the broker does not inspect this instance's TLS "
		    "(tls_inspect = true in its entry)");
	for (i = 0; i < n; i++)
		(void)close(fds[i]);
	for (i = 0; i < sizeof(unset) / sizeof(unset[0]); i++)
		if (unsetenv(unset[i]) != 0)
			sandbox_die(EXIT_SANDBOX, "unsetenv", strerror(errno));
	for (i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		if (setenv(set[i], SANDBOX_PROXY_URL, 1) != 0)
			sandbox_die(EXIT_SANDBOX, "setenv", strerror(errno));
	if (ca != NULL)
		bundle_write(ca);
	free(ca);
	return cfd;
}

int
sandbox_net_rules(scmp_filter_ctx ctx)
{
	static const int plain[] = { SCMP_SYS(connect), SCMP_SYS(bind),
		SCMP_SYS(listen), SCMP_SYS(accept), SCMP_SYS(accept4),
		SCMP_SYS(sendto), SCMP_SYS(sendmsg), SCMP_SYS(sendmmsg) };
	static const int fams[] = { AF_INET, AF_INET6 };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	static const int pair_types[] = { SOCK_STREAM, SOCK_SEQPACKET };
	size_t i, j;

	for (i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, plain[i], 0) < 0)
			return -1;
	/*
	 * The low 32 bits the kernel reads of the family; the type's low 4
	 * bits (SOCK_NONBLOCK and SOCK_CLOEXEC sit above them).
	 */
	for (i = 0; i < 2; i++)
		for (j = 0; j < 2; j++)
			if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW,
				SCMP_SYS(socket), 2,
				SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffU,
				    (scmp_datum_t)fams[i]),
				SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
				    (scmp_datum_t)types[j])) < 0)
				return -1;
	/*
	 * socketpair() only of connected types: a datagram pair's socket
	 * could still sendto() or connect() any datagram socket by path
	 * (/dev/log, the notify socket), which the namespace does not scope.
	 */
	for (j = 0; j < 2; j++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair),
			2, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffU, AF_UNIX),
			SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
			    (scmp_datum_t)pair_types[j])) < 0)
			return -1;
	return 0;
}
