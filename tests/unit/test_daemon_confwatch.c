/* SPDX-License-Identifier: ISC */
/*
 * Unit tests of broker/confwatch.c through confstate: once the watch is
 * trusted, a look at the files is one epoll_wait() (no stat(), which the
 * test interposes to count), so each way of changing
 * a file must reach it as an event, or the next look would serve the old
 * snapshot. Each test first makes the watch trusted, then changes a file
 * one way, and expects the very next look to see the change.
 */
#include <sys/mount.h>
#include <sys/syscall.h>

#include <sched.h>

#include <fcntl.h>
#include <unistd.h>

#include "broker/confstate.h"
#include "broker/log.h"
#include "conf_test.h"

/* stat() calls on the test's files: the stat check's work. */
static unsigned stats;

/* The check's stat(), counted when it is about the test's folder. */
int
stat(const char *restrict path, struct stat *restrict st)
{
	if (ct_dir[0] != '\0' && strncmp(path, ct_dir, strlen(ct_dir)) == 0)
		stats++;
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

static void
setup(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	log_set_fd(fd); /* egress.config events go nowhere */
	ct_mkdir();
}

TestSuite(confwatch, .init = setup, .fini = ct_rmdir);

static void
write_conf(const char *name, const char *mode)
{
	char text[256];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\nsignature_mode = %s\n", mode);
	ct_write_str(name, text);
}

static void
start(struct confstate *cs, const char *name)
{
	struct conf_errors e = { 0 };

	cr_assert_eq(confstate_init(cs, ct_path(name), NULL, NULL, &e), 0,
	    "%s", ct_errors(&e));
}

static uint64_t
look(struct confstate *cs, const char *instance)
{
	struct confref *r = confstate_get_for(cs, instance);
	uint64_t g;

	cr_assert_not_null(r, "%s", confstate_error(cs));
	g = r->snap->generation;
	confref_unref(r);
	return g;
}

/* The first look confirms the watch with the stat check; from then on it
 * is trusted, and looks stay at generation 1, with no stat() at all,
 * while nothing changes. */
static void
trust(struct confstate *cs)
{
	cr_assert_eq(look(cs, NULL), 1);
	cr_assert_eq(cs->watch.state, CONFWATCH_TRUSTED,
	    "the watch is not in use (state %d)", cs->watch.state);
	stats = 0;
	cr_assert_eq(look(cs, NULL), 1);
	cr_assert_eq(cs->watch.state, CONFWATCH_TRUSTED);
	cr_assert_eq(stats, 0, "a trusted look ran %u stat()s", stats);
	cr_assert_str_eq(confwatch_describe(&cs->watch), "inotify");
}

Test(confwatch, sees_a_rewrite_in_place)
{
	struct confstate cs;

	write_conf("c.ini", "disabled");
	start(&cs, "c.ini");
	trust(&cs);
	write_conf("c.ini", "permissive");
	cr_expect_eq(look(&cs, NULL), 2);
	confstate_done(&cs);
}

Test(confwatch, sees_a_file_renamed_over_it)
{
	struct confstate cs;

	write_conf("c.ini", "disabled");
	start(&cs, "c.ini");
	trust(&cs);
	write_conf("c.ini.new", "permissive");
	cr_assert_eq(rename(ct_path("c.ini.new"), ct_path("c.ini")), 0);
	cr_expect_eq(look(&cs, NULL), 2);
	confstate_done(&cs);
}

/* A write through another name of the same file, in a folder that is not
 * watched, still changes the watched file. */
Test(confwatch, sees_a_write_through_a_hard_link)
{
	struct confstate cs;
	static const char text[] =
	    "[plugins.security]\nsignature_mode = permissive\n";
	int fd;

	write_conf("c.ini", "disabled");
	cr_assert_eq(mkdir(ct_path("elsewhere"), 0700), 0);
	cr_assert_eq(link(ct_path("c.ini"), ct_path("elsewhere/same")), 0);
	start(&cs, "c.ini");
	trust(&cs);
	fd = open(ct_path("elsewhere/same"), O_WRONLY | O_TRUNC | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, sizeof(text) - 1),
	    (ssize_t)sizeof(text) - 1);
	cr_assert_eq(close(fd), 0);
	cr_expect_eq(look(&cs, NULL), 2);
	confstate_done(&cs);
}

/* A mode change alone (the same bytes) is a change: key and token files
 * are refused when others may read them. */
Test(confwatch, sees_a_mode_change)
{
	struct confstate cs;

	write_conf("c.ini", "disabled");
	cr_assert_eq(chmod(ct_path("c.ini"), 0600), 0);
	start(&cs, "c.ini");
	trust(&cs);
	cr_assert_eq(chmod(ct_path("c.ini"), 0644), 0);
	cr_expect_eq(look(&cs, NULL), 2);
	confstate_done(&cs);
}

/* Other entries of the folder are not the snapshot's: no stat check, no
 * reload, the watch stays trusted. */
Test(confwatch, ignores_other_files_of_the_folder)
{
	struct confstate cs;

	write_conf("c.ini", "disabled");
	start(&cs, "c.ini");
	trust(&cs);
	ct_write_str("unrelated.log", "a line\n"); /* created: queued */
	ct_write_str("unrelated.log", "another line\n");
	cr_assert_eq(rename(ct_path("unrelated.log"), ct_path("old.log")), 0);
	stats = 0;
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_eq(stats, 0, "%u stat()s for another file", stats);
	cr_expect_eq(cs.watch.state, CONFWATCH_TRUSTED);
	cr_expect_eq(cs.reloads, 0);
	confstate_done(&cs);
}

/*
 * The folder holding file (a folder of the path) moves away and another
 * is put in its place: the next look reads the new file, and the watch
 * is set up again over the new folder.
 */
static void
folder_replaced(const char *file, const char *folder, const char *moved)
{
	struct confstate cs;

	write_conf(file, "disabled");
	start(&cs, file);
	trust(&cs);
	cr_assert_eq(rename(ct_path(folder), ct_path(moved)), 0);
	write_conf(file, "permissive");
	cr_expect_eq(look(&cs, NULL), 2);
	cr_expect_eq(look(&cs, NULL), 2);
	cr_expect_eq(cs.watch.state, CONFWATCH_TRUSTED, "not watched again");
	write_conf(file, "disabled");
	cr_expect_eq(look(&cs, NULL), 3);
	confstate_done(&cs);
}

Test(confwatch, sees_its_folder_replaced)
{
	folder_replaced("d/c.ini", "d", "d.old");
}

Test(confwatch, sees_a_folder_above_replaced)
{
	folder_replaced("a/b/c.ini", "a", "a.old");
}

/* A path through a symbolic link is not watched (the link could be
 * re-pointed where nothing watches): every look runs the stat check, and
 * edits are still seen. */
Test(confwatch, a_path_through_a_link_is_checked_by_stat)
{
	struct confstate cs;

	write_conf("real/c.ini", "disabled");
	cr_assert_eq(symlink("real", ct_path("link")), 0);
	start(&cs, "link/c.ini");
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_eq(cs.watch.state, CONFWATCH_OFF);
	stats = 0;
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_gt(stats, 0, "a look without the watch ran no stat()");
	cr_expect(strstr(confwatch_describe(&cs.watch),
		      "link/c.ini goes through a symbolic link") != NULL,
	    "%s", confwatch_describe(&cs.watch));
	write_conf("real.new/c.ini", "permissive");
	cr_assert_eq(unlink(ct_path("link")), 0);
	cr_assert_eq(symlink("real.new", ct_path("link")), 0);
	cr_expect_eq(look(&cs, NULL), 2);
	confstate_done(&cs);
}

static const char two_instances[] =
    "[plugins.security]\nsignature_mode = disabled\n"
    "[plugins.entries.a]\nplugin = a\nmanifest = a/manifest.ini\n"
    "permissions = http_client\negress_hosts = a.example\n"
    "[plugins.entries.b]\nplugin = b\nmanifest = b/manifest.ini\n"
    "permissions = http_client\negress_hosts = b.example\n";

static void
write_manifest(const char *name, const char *host)
{
	char text[256];

	(void)snprintf(text, sizeof(text),
	    "[plugin]\nname = %s\nversion = 1\npermissions = http_client\n"
	    "[egress]\nhosts = %s\n",
	    name, host);
	ct_write_str(name[0] == 'a' ? "a/manifest.ini" : "b/manifest.ini",
	    text);
}

/*
 * A look for one instance that finds events checks every file, not only
 * that instance's: had it checked only its own and trusted the watch
 * again, the other instance's changed manifest would never be read.
 */
Test(confwatch, another_instances_change_is_not_lost)
{
	struct confstate cs;

	ct_write_str("c.ini", two_instances);
	write_manifest("a", "a.example");
	write_manifest("b", "b.example");
	start(&cs, "c.ini");
	trust(&cs);
	write_manifest("b", "b.example b2.example");
	(void)look(&cs, "a");
	cr_expect_eq(look(&cs, "b"), 2);
	confstate_done(&cs);
}

/* Creating a file the snapshot recorded as absent (a manifest's .sig) is
 * a change. */
Test(confwatch, sees_an_absent_file_created)
{
	struct confstate cs;

	ct_write_str("c.ini", two_instances);
	write_manifest("a", "a.example");
	write_manifest("b", "b.example");
	start(&cs, "c.ini");
	trust(&cs);
	ct_write_str("a/manifest.ini.sig", "not a signature\n");
	cr_expect_eq(look(&cs, "a"), 2);
	confstate_done(&cs);
}

/* A folder above losing its mode or owner may leave the file unreadable
 * to the broker: the next look runs the stat check. */
Test(confwatch, sees_a_mode_change_above)
{
	struct confstate cs;

	write_conf("a/b/c.ini", "disabled");
	cr_assert_eq(chmod(ct_path("a"), 0700), 0);
	start(&cs, "a/b/c.ini");
	trust(&cs);
	cr_assert_eq(chmod(ct_path("a"), 0750), 0);
	stats = 0;
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_gt(stats, 0,
	    "no stat check after the folder's mode changed");
	confstate_done(&cs);
}

/*
 * A folder busy with other files fills the queue between two looks: the
 * look reads a bounded part of it, then sets the watch up again (the
 * backlog dropped) after a stat check, and trusts it after the next.
 */
Test(confwatch, a_long_queue_is_dropped)
{
	struct confstate cs;
	char name[32];
	int i;

	write_conf("c.ini", "disabled");
	start(&cs, "c.ini");
	trust(&cs);

	for (i = 0; i < 1000; i++) { /* a new name each: not merged */
		(void)snprintf(name, sizeof(name), "n%d", i);
		ct_write_str(name, "");
	}
	stats = 0;
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_gt(stats, 0, "the long queue was not dropped");
	cr_expect_eq(cs.watch.state, CONFWATCH_UNVERIFIED);
	cr_expect_eq(look(&cs, NULL), 1);
	cr_expect_eq(cs.watch.state, CONFWATCH_TRUSTED);
	confstate_done(&cs);
}

/*
 * inotify reports no mount: a file system mounted over the file's folder
 * is seen through the mount table's change. Run as root, in a mount
 * namespace of the test's own (gone with its process).
 */
Test(confwatch, sees_a_folder_mounted_over)
{
	struct confstate cs;

	if (geteuid() != 0)
		cr_skip_test("mounting needs root");
	cr_assert_eq(unshare(CLONE_NEWNS), 0);
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	write_conf("d/c.ini", "disabled");
	write_conf("other/c.ini", "permissive");
	start(&cs, "d/c.ini");
	trust(&cs);
	cr_assert_eq(mount(ct_path("other"), ct_path("d"), NULL, MS_BIND,
			 NULL),
	    0);
	cr_expect_eq(look(&cs, NULL), 2);
	cr_assert_eq(umount(ct_path("d")), 0);
	cr_expect_eq(look(&cs, NULL), 3);
	confstate_done(&cs);
}

/* An entry whose package folder does not exist (its manifest and .sig are
 * recorded all the same): not watched, and said so; edits are still
 * seen, by the stat check. */
Test(confwatch, a_missing_folder_is_checked_by_stat)
{
	struct confstate cs;

	ct_write_str("c.ini", two_instances);
	write_manifest("a", "a.example"); /* b/ is never made */
	start(&cs, "c.ini");
	cr_expect_eq(look(&cs, "a"), 1);
	cr_expect_eq(cs.watch.state, CONFWATCH_OFF);
	cr_expect(strstr(confwatch_describe(&cs.watch),
		      "b/manifest.ini is in a folder that does not exist") !=
		NULL,
	    "%s", confwatch_describe(&cs.watch));
	write_manifest("a", "a.example a2.example");
	cr_expect_eq(look(&cs, "a"), 2);
	confstate_done(&cs);
}
