/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/listen: instance sockets follow each snapshot's
 * socket_owner / socket_group. Removing the line gives the socket back to
 * the broker's own uid and gid (the old owner or group loses access), a
 * change of owner or group revokes the connections accepted before it
 * (the revoke callback names the instance), and an unchanged entry
 * revokes nothing. An owner that can no longer be applied gives the
 * socket back to the broker at 0600, even when the old owner widens its
 * mode in between. A socket swapped for a symlink is never chmodded
 * through it. An instance_socket_dir is checked component by component
 * from "/": a symlink anywhere on the path, a component owned by a user
 * other than root and the broker, a parent writable by others without the
 * sticky bit, or a socket folder writable by others, is refused, with a
 * log line naming the path and the component at fault; a link an
 * attacker re-points is refused before and after, and a folder that turns
 * unsafe at a reload stops being served. Sockets live in a fresh tree
 * under /tmp; the chown to a foreign id needs root (CAP_CHOWN), so those
 * cases skip otherwise.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/event.h>

#include "broker/broker.h"
#include "broker/listen.h"
#include "broker/log.h"
#include "conf/conf.h"

#define NOBODY 65534

/*
 * The broker's fchownat(), with a stand-in for an old owner that races
 * it: while widen_before_chown is set, the file's mode becomes 0666 just
 * before each chown, as an owner looping on chmod could make it.
 */
static int widen_before_chown;

int
fchownat(int dirfd, const char *name, uid_t uid, gid_t gid, int flags)
{
	if (widen_before_chown)
		(void)fchmodat(dirfd, name, 0666, 0);
	return (int)syscall(SYS_fchownat, dirfd, name, uid, gid, flags);
}

struct revokes {
	int n;
	char last[64];
};

static void
acc_cb(void *arg, int fd, const char *instance)
{
	(void)close(fd);
}

static void
revoke_cb(void *arg, const char *instance)
{
	struct revokes *rv = arg;

	rv->n++;
	(void)snprintf(rv->last, sizeof(rv->last), "%s", instance);
}

struct owner_case {
	char first_owner[16]; /* "" for unset */
	char first_group[16];
	char second_owner[16];
	char second_group[16];
	unsigned want_uid; /* after the second reconcile; -1: euid */
	unsigned want_gid; /* -1: egid */
	int want_revokes;
};

ParameterizedTestParameters(broker_listen, owner_follows_entry)
{
	static struct owner_case cases[] = {
		{ "", "4242", "", "", -1u, -1u, 1 },
		{ "4343", "", "", "", -1u, -1u, 1 },
		{ "4343", "4242", "", "4242", -1u, 4242, 1 },
		{ "", "4242", "", "4244", -1u, 4244, 1 },
		{ "", "4242", "", "4242", -1u, 4242, 0 },
		{ "", "", "", "", -1u, -1u, 0 },
		{ "", "", "", "4242", -1u, 4242, 1 },
	};

	return cr_make_param_array(struct owner_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

static char *
opt(char *s)
{
	return s[0] != '\0' ? s : NULL;
}

ParameterizedTest(struct owner_case *c, broker_listen, owner_follows_entry)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = broker_base_new();
	struct revokes rv;
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;
	unsigned uid, gid;

	if (geteuid() != 0)
		cr_skip_test("chown to a foreign id needs root");
	memset(&rv, 0, sizeof(rv));
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(base != NULL);
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, &rv, &l) == 0);
	listen_set_revoke_cb(l, revoke_cb);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	ci.socket_owner = opt(c->first_owner);
	ci.socket_group = opt(c->first_group);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert_eq(rv.n, 0, "a new socket revokes nothing");
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);

	ci.socket_owner = opt(c->second_owner);
	ci.socket_group = opt(c->second_group);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert(stat(path, &st) == 0);
	uid = c->want_uid == -1u ? (unsigned)geteuid() : c->want_uid;
	gid = c->want_gid == -1u ? (unsigned)getegid() : c->want_gid;
	cr_assert_eq((unsigned)st.st_uid, uid, "uid %u, want %u",
	    (unsigned)st.st_uid, uid);
	cr_assert_eq((unsigned)st.st_gid, gid, "gid %u, want %u",
	    (unsigned)st.st_gid, gid);
	cr_assert_eq(st.st_mode & 0777, 0660);
	cr_assert_eq(rv.n, c->want_revokes);
	if (c->want_revokes > 0)
		cr_assert_str_eq(rv.last, "a");
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

/* An owner that cannot be resolved closes the socket (0600) and revokes. */
Test(broker_listen, unknown_owner_closes)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = broker_base_new();
	struct revokes rv;
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	memset(&rv, 0, sizeof(rv));
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, &rv, &l) == 0);
	listen_set_revoke_cb(l, revoke_cb);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	ci.socket_owner = "no-such-user-egressd-test";
	cr_assert_eq(listen_reconcile(l, &s), 1);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	cr_assert(stat(path, &st) == 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(rv.n, 1);
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

/*
 * From a foreign owner that was applied to one that cannot be: the
 * socket goes back to the broker at 0600, so the old owner can neither
 * connect nor open it to others (as root; skipped otherwise). With race
 * set, the old owner widens the mode between the broker's chmod and its
 * chown back, and the socket still ends the broker's at 0600.
 */
static void
take_back(int race)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = broker_base_new();
	struct revokes rv;
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	if (geteuid() != 0)
		cr_skip_test("needs root to give the socket to another user");
	memset(&rv, 0, sizeof(rv));
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, &rv, &l) == 0);
	listen_set_revoke_cb(l, revoke_cb);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	ci.socket_owner = "4242";
	ci.socket_group = "4243";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	cr_assert(stat(path, &st) == 0);
	cr_assert_eq(st.st_uid, 4242);
	cr_assert_eq(st.st_mode & 0777, 0660);
	ci.socket_owner = "no-such-user-egressd-test";
	widen_before_chown = race;
	cr_assert_eq(listen_reconcile(l, &s), 1);
	widen_before_chown = 0;
	cr_assert(stat(path, &st) == 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "left %o", st.st_mode & 0777);
	cr_assert_eq(st.st_uid, geteuid(), "still the old owner's");
	cr_assert_eq(st.st_gid, getegid(), "still the old group's");
	cr_assert_eq(rv.n, 1);
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

Test(broker_listen, unknown_owner_after_a_foreign_one_takes_it_back)
{
	take_back(0);
}

Test(broker_listen, old_owner_racing_the_take_back_keeps_nothing)
{
	take_back(1);
}

struct dir_case {
	char name[24];
	unsigned mode;
	int foreign_owner; /* chown the folder to uid 4242 */
	int want_bad;
};

ParameterizedTestParameters(broker_listen, socket_dir_must_be_ours)
{
	static struct dir_case cases[] = {
		{ "0700", 0700, 0, 0 },
		{ "0755", 0755, 0, 0 },
		{ "world-writable", 0777, 0, 1 },
		{ "sticky-1777", 01777, 0, 1 },
		{ "group-writable", 0770, 0, 1 },
		{ "foreign-owner", 0755, 1, 1 },
	};

	return cr_make_param_array(struct dir_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct dir_case *c, broker_listen, socket_dir_must_be_ours)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	if (c->foreign_owner && geteuid() != 0)
		cr_skip_test("chown to a foreign id needs root");
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(chmod(dir, c->mode) == 0);
	if (c->foreign_owner)
		cr_assert(chown(dir, 4242, (gid_t)-1) == 0);
	cr_assert(listen_new(base, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), c->want_bad, "%s", c->name);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	if (c->want_bad) {
		cr_assert(lstat(path, &st) != 0, "%s: socket created",
		    c->name);
		cr_assert_eq(listen_count(l), 0);
	} else {
		cr_assert(lstat(path, &st) == 0);
		cr_assert(S_ISSOCK(st.st_mode));
		cr_assert_eq(st.st_mode & 0777, 0660);
	}
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

/*
 * The socket replaced by a symlink to another file between two reloads:
 * the mode is never applied through the link.
 */
Test(broker_listen, chmod_never_follows_a_link)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256], victim[256];
	struct event_base *base = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;
	int fd;

	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	(void)snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	(void)close(fd);
	cr_assert(unlink(path) == 0);
	cr_assert(symlink(victim, path) == 0);
	(void)listen_reconcile(l, &s);
	cr_assert(stat(victim, &st) == 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "chmod followed the link: %o",
	    (unsigned)(st.st_mode & 0777));
	listen_free(l);
	(void)unlink(path);
	(void)unlink(victim);
	(void)rmdir(dir);
	event_base_free(base);
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)remove(path);
	return 0;
}

/* Remove the tree at dir without following links. */
static void
rm_tree(const char *dir)
{
	(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
mkdir_as(const char *path, unsigned mode, int uid)
{
	cr_assert(mkdir(path, 0700) == 0, "mkdir %s", path);
	if (uid >= 0)
		cr_assert(chown(path, (uid_t)uid, (gid_t)-1) == 0);
	cr_assert(chmod(path, mode) == 0);
}

/* A listening socket at path standing for someone else's broker. */
static int
bind_at(const char *path)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	cr_assert(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	cr_assert(listen(fd, 1) == 0);
	return fd;
}

/* Send the log to a temporary file; return its fd. */
static int
log_capture(void)
{
	char name[] = "/tmp/test_broker_listen_logXXXXXX";
	int fd = mkstemp(name);

	cr_assert(fd >= 0);
	(void)unlink(name);
	log_set_fd(fd);
	return fd;
}

/* Whether the log in fd has a line holding every needle. */
static int
log_has(int fd, const char *needle1, const char *needle2)
{
	static char buf[64 * 1024];
	char *line, *save = NULL;
	ssize_t n;

	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, needle1) != NULL &&
		    strstr(line, needle2) != NULL)
			return 1;
	return 0;
}

struct tree_case {
	char name[32];
	unsigned parent_mode; /* BASE/p */
	int parent_uid;	      /* -1: the test's own (root) */
	int parent_link;      /* the path goes through BASE/lp -> p */
	unsigned final_mode;  /* BASE/p/s; 0: missing (created) */
	int final_uid;
	int final_link; /* the path ends in BASE/p/ls -> s */
	char fault[4];	/* component named in the log; "": accepted */
};

ParameterizedTestParameters(broker_listen, socket_dir_every_component)
{
	static struct tree_case cases[] = {
		{ "good", 0755, -1, 0, 0755, -1, 0, "" },
		{ "good-0700", 0700, -1, 0, 0700, -1, 0, "" },
		{ "created", 0755, -1, 0, 0, -1, 0, "" },
		{ "symlinked-folder", 0755, -1, 0, 0755, -1, 1, "ls" },
		{ "symlinked-parent", 0755, -1, 1, 0755, -1, 0, "lp" },
		{ "parent-foreign-uid", 0755, NOBODY, 0, 0755, -1, 0, "p" },
		{ "parent-group-writable", 0775, -1, 0, 0755, -1, 0, "p" },
		{ "parent-world-writable", 0777, -1, 0, 0755, -1, 0, "p" },
		{ "parent-sticky", 01777, -1, 0, 0755, -1, 0, "" },
		{ "parent-sticky-created", 01777, -1, 0, 0, -1, 0, "" },
		{ "parent-sticky-foreign", 01777, NOBODY, 0, 0755, -1, 0,
		    "p" },
		{ "sticky-foreign-folder", 01777, -1, 0, 0755, NOBODY, 0,
		    "s" },
		{ "folder-group-writable", 0755, -1, 0, 0775, -1, 0, "s" },
		{ "folder-sticky", 0755, -1, 0, 01777, -1, 0, "s" },
	};

	return cr_make_param_array(struct tree_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct tree_case *c, broker_listen,
    socket_dir_every_component)
{
	char base[] = "/tmp/test_broker_listen_treeXXXXXX", dir[256], p[256],
	     fin[256], sock[512], comp[512];
	struct event_base *base_ev = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;
	int logfd, refused = c->fault[0] != '\0';

	if (geteuid() != 0)
		cr_skip_test("the tree needs chown to uid %d: run as root",
		    NOBODY);
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(base) != NULL);
	cr_assert(chmod(base, 0755) == 0);
	(void)snprintf(p, sizeof(p), "%s/p", base);
	(void)snprintf(fin, sizeof(fin), "%s/p/s", base);
	mkdir_as(p, 0755, -1);
	if (c->final_mode != 0)
		mkdir_as(fin, c->final_mode, c->final_uid);
	if (c->parent_link) {
		(void)snprintf(comp, sizeof(comp), "%s/lp", base);
		cr_assert(symlink("p", comp) == 0);
		(void)snprintf(dir, sizeof(dir), "%s/lp/s", base);
	} else if (c->final_link) {
		(void)snprintf(comp, sizeof(comp), "%s/p/ls", base);
		cr_assert(symlink("s", comp) == 0);
		(void)snprintf(dir, sizeof(dir), "%s/p/ls", base);
	} else
		(void)snprintf(dir, sizeof(dir), "%s/p/s", base);
	/* Last, so that the test itself may still write in p. */
	if (c->parent_uid >= 0)
		cr_assert(chown(p, (uid_t)c->parent_uid, (gid_t)-1) == 0);
	cr_assert(chmod(p, c->parent_mode) == 0);

	logfd = log_capture();
	cr_assert(listen_new(base_ev, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), refused, "%s", c->name);
	(void)snprintf(sock, sizeof(sock), "%s/a.sock", fin);
	if (refused) {
		cr_assert_eq(listen_count(l), 0, "%s", c->name);
		cr_assert(lstat(sock, &st) != 0, "%s: socket created",
		    c->name);
		(void)snprintf(comp, sizeof(comp), "\"component\":\"%s/%s%s\"",
		    base,
		    strcmp(c->fault, "s") == 0 || strcmp(c->fault, "ls") == 0 ?
			"p/" :
			"",
		    c->fault);
		cr_assert(log_has(logfd, comp, dir),
		    "%s: no log line with "
		    "%s",
		    c->name, comp);
	} else {
		cr_assert_eq(listen_count(l), 1, "%s", c->name);
		cr_assert(lstat(sock, &st) == 0, "%s", c->name);
		cr_assert(S_ISSOCK(st.st_mode));
		cr_assert_eq(st.st_mode & 0777, 0660);
	}
	listen_free(l);
	log_set_fd(-1);
	(void)close(logfd);
	rm_tree(base);
	event_base_free(base_ev);
}

/*
 * The review's attack: instance_socket_dir is a link in a folder another
 * user owns, first pointing at a real folder of root's, then re-pointed
 * by that user at a folder holding a fake broker socket of theirs. Both
 * are refused, and the fake socket is neither replaced nor removed.
 */
Test(broker_listen, link_swap_refused_before_and_after)
{
	char base[] = "/tmp/test_broker_listen_swapXXXXXX", att[256],
	     good[256], fake[256], link[256], tmp[256], sock[512], fsock[512],
	     comp[512];
	struct event_base *base_ev = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st, fst;
	int logfd, ffd;

	if (geteuid() != 0)
		cr_skip_test("the attacker's folder needs chown to uid %d: "
			     "run as root",
		    NOBODY);
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(base) != NULL);
	cr_assert(chmod(base, 0755) == 0);
	(void)snprintf(att, sizeof(att), "%s/att", base);
	(void)snprintf(good, sizeof(good), "%s/good", base);
	(void)snprintf(fake, sizeof(fake), "%s/att/fake", base);
	(void)snprintf(link, sizeof(link), "%s/att/run", base);
	(void)snprintf(tmp, sizeof(tmp), "%s/att/run.new", base);
	mkdir_as(good, 0755, -1);
	mkdir_as(att, 0755, NOBODY);
	mkdir_as(fake, 0755, NOBODY);
	(void)snprintf(fsock, sizeof(fsock), "%s/a.sock", fake);
	ffd = bind_at(fsock);
	cr_assert(lchown(fsock, NOBODY, NOBODY) == 0);
	cr_assert(lstat(fsock, &fst) == 0);
	cr_assert(symlink(good, link) == 0);
	cr_assert(lchown(link, NOBODY, NOBODY) == 0);

	logfd = log_capture();
	cr_assert(listen_new(base_ev, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = link;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	(void)snprintf(comp, sizeof(comp), "\"component\":\"%s\"", att);

	/* Before: the link leads to root's own folder. */
	cr_assert_eq(listen_reconcile(l, &s), 1);
	cr_assert_eq(listen_count(l), 0);
	(void)snprintf(sock, sizeof(sock), "%s/a.sock", good);
	cr_assert(lstat(sock, &st) != 0, "a socket behind the link");
	cr_assert(log_has(logfd, comp, "owned by a user other than root"));

	/* After: the attacker re-points it at the fake broker. */
	cr_assert(symlink(fake, tmp) == 0);
	cr_assert(rename(tmp, link) == 0);
	cr_assert_eq(listen_reconcile(l, &s), 1);
	cr_assert_eq(listen_count(l), 0);
	cr_assert(lstat(fsock, &st) == 0, "the fake socket was removed");
	cr_assert(st.st_ino == fst.st_ino && st.st_uid == NOBODY,
	    "the fake socket was replaced");

	/* The same link in a folder of root's: the link itself is refused. */
	(void)snprintf(link, sizeof(link), "%s/run", base);
	cr_assert(symlink(good, link) == 0);
	cr_assert_eq(listen_reconcile(l, &s), 1);
	cr_assert_eq(listen_count(l), 0);
	cr_assert(lstat(sock, &st) != 0, "a socket behind the link");
	(void)snprintf(comp, sizeof(comp), "\"component\":\"%s\"", link);
	cr_assert(log_has(logfd, comp, "symlink"));

	listen_free(l);
	log_set_fd(-1);
	(void)close(logfd);
	(void)close(ffd);
	rm_tree(base);
	event_base_free(base_ev);
}

/*
 * A folder that was served and turns unsafe by a reload (its parent
 * handed to another user, who swaps the folder for a link to a folder of
 * their own): the reload refuses it and stops serving its sockets,
 * without unlinking through the link; once the folder is safe again, the
 * next reload serves it again.
 */
Test(broker_listen, folder_turned_unsafe_stops_serving)
{
	char base[] = "/tmp/test_broker_listen_turnXXXXXX", p[256], dir[256],
	     old[256], evil[256], sock[512], esock[512];
	struct event_base *base_ev = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st, est;
	int efd;

	if (geteuid() != 0)
		cr_skip_test("chown to uid %d needs root", NOBODY);
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(base) != NULL);
	cr_assert(chmod(base, 0755) == 0);
	(void)snprintf(p, sizeof(p), "%s/p", base);
	(void)snprintf(dir, sizeof(dir), "%s/p/s", base);
	(void)snprintf(old, sizeof(old), "%s/p/s.old", base);
	(void)snprintf(evil, sizeof(evil), "%s/evil", base);
	mkdir_as(p, 0755, -1);
	mkdir_as(evil, 0755, NOBODY);
	cr_assert(listen_new(base_ev, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert_eq(listen_count(l), 1);

	(void)snprintf(esock, sizeof(esock), "%s/a.sock", evil);
	efd = bind_at(esock);
	cr_assert(lstat(esock, &est) == 0);
	cr_assert(chown(p, NOBODY, (gid_t)-1) == 0);
	cr_assert(rename(dir, old) == 0);
	cr_assert(symlink(evil, dir) == 0);
	cr_assert_eq(listen_reconcile(l, &s), 1);
	cr_assert_eq(listen_count(l), 0, "still serving an unsafe folder");
	cr_assert(lstat(esock, &st) == 0 && st.st_ino == est.st_ino,
	    "the other user's socket was replaced or removed");
	(void)snprintf(sock, sizeof(sock), "%s/a.sock", old);
	cr_assert(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode),
	    "the old socket file was unlinked through the unsafe path");

	/* Safe again: served again, the stale socket file replaced. */
	cr_assert(unlink(dir) == 0);
	cr_assert(rename(old, dir) == 0);
	cr_assert(chown(p, 0, (gid_t)-1) == 0);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert_eq(listen_count(l), 1);
	(void)snprintf(sock, sizeof(sock), "%s/a.sock", dir);
	cr_assert(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode));

	listen_free(l);
	(void)close(efd);
	rm_tree(base);
	event_base_free(base_ev);
}

/* A relative instance_socket_dir is checked from "/" too. */
Test(broker_listen, relative_dir_checked_from_root)
{
	char base[] = "/tmp/test_broker_listen_relXXXXXX", cwd[4096],
	     sock[512];
	struct event_base *base_ev = broker_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(getcwd(cwd, sizeof(cwd)) != NULL);
	cr_assert(mkdtemp(base) != NULL);
	cr_assert(chdir(base) == 0);
	cr_assert(mkdir("p", 0777) == 0);
	cr_assert(chmod("p", 0777) == 0); /* no sticky bit */
	cr_assert(listen_new(base_ev, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = "p/./s";
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 1);
	cr_assert(lstat("p/s", &st) != 0, "created under an unsafe parent");
	cr_assert(chmod("p", 0755) == 0);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	(void)snprintf(sock, sizeof(sock), "%s/p/s/a.sock", base);
	cr_assert(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode));
	listen_free(l);
	cr_assert(chdir(cwd) == 0);
	rm_tree(base);
	event_base_free(base_ev);
}
