/* SPDX-License-Identifier: ISC */
/*
 * Whether a snapshot is still the configuration on disk (conf.h): every
 * file it was built from (the INI file, manifests, signatures, keys,
 * token files) is compared with the identity recorded when it was read,
 * and a file changed too recently to trust its identity is compared by
 * the digest of its bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "conf/confint.h"

/*
 * A racy file's identity cannot be trusted: compare its bytes with the
 * digest taken when it was read. Anything unreadable, or a file recorded
 * without a digest, counts as changed.
 */
static int
file_bytes_differ(const struct conf_file_id *was)
{
	struct conf_file_id id = { 0 };
	char *buf = NULL;
	size_t len = 0;
	int differ = 1;

	if (!was->has_digest || was->size < 0)
		return 1;
	if (conf_read_file(was->path, (size_t)was->size, &buf, &len, &id) ==
		0 &&
	    id.has_digest &&
	    memcmp(id.digest, was->digest, sizeof(id.digest)) == 0)
		differ = 0;
	free(buf);
	return differ;
}

static int
file_is_stale(struct conf_file_id *was)
{
	struct conf_file_id now;

	if (conf_file_id_stat(was->path, &now) != 0)
		return 1;
	if (now.exists != was->exists)
		return 1;
	if (!now.exists)
		return 0;
	if (now.dev != was->dev || now.ino != was->ino ||
	    now.size != was->size || now.mtime_ns != was->mtime_ns ||
	    now.ctime_ns != was->ctime_ns)
		return 1;
	if (was->racy) {
		if (file_bytes_differ(was))
			return 1;
		/*
		 * The bytes are the ones parsed, and the identity is now
		 * older than the racy window: a later rewrite must change
		 * mtime or ctime, so the stat identity alone can be trusted
		 * from here on (settled).
		 */
		if (!now.racy)
			was->racy = 0;
	}
	return 0;
}

int
conf_snapshot_is_stale(struct conf_snapshot *s)
{
	size_t i;

	for (i = 0; i < s->nfiles; i++)
		if (file_is_stale(&s->files[i]))
			return 1;
	return 0;
}

int
conf_snapshot_is_stale_for(struct conf_snapshot *s, const char *instance)
{
	const struct conf_instance *ci;
	size_t i, k;

	if ((ci = conf_instance_find(s, instance)) == NULL)
		return conf_snapshot_is_stale(s);
	for (i = 0; i < s->nfiles; i++)
		if (s->files[i].shared && file_is_stale(&s->files[i]))
			return 1;
	for (k = 0; k < 2; k++) {
		i = ci->file_idx[k];
		if (i >= s->nfiles)
			return 1; /* never recorded: assume changed */
		if (!s->files[i].shared && file_is_stale(&s->files[i]))
			return 1;
	}
	return 0;
}
