/* SPDX-License-Identifier: ISC */
/*
 * Corpus replay driver: runs LLVMFuzzerTestOneInput over every regular file
 * of the folders (or files) named on the command line, so that each fuzz
 * corpus is an ordinary test with any compiler. Exits non-zero when a
 * folder is missing or empty (a corpus that ran nothing proves nothing);
 * a crash or sanitizer report fails the test by itself.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *f;
	uint8_t *buf = NULL;
	long len;
	int rc = -1;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	/* One spare byte so that an empty file still gets a valid pointer. */
	if ((buf = malloc((size_t)len + 1)) == NULL)
		goto out;
	if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	(void)LLVMFuzzerTestOneInput(buf, (size_t)len);
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "replay: %s: cannot read\n", path);
	free(buf);
	(void)fclose(f);
	return rc;
}

int
main(int argc, char **argv)
{
	size_t total = 0;
	int i;

	for (i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			return 1;
		}
		if (S_ISREG(st.st_mode)) {
			if (run_file(argv[i]) != 0)
				return 1;
			total++;
			continue;
		}
		if ((d = opendir(argv[i])) == NULL) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			return 1;
		}
		while ((de = readdir(d)) != NULL) {
			char path[4096];
			struct stat fst;

			if (de->d_name[0] == '.')
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", argv[i],
				de->d_name) >= (int)sizeof(path))
				continue;
			if (stat(path, &fst) != 0 || !S_ISREG(fst.st_mode))
				continue;
			if (run_file(path) != 0) {
				closedir(d);
				return 1;
			}
			total++;
		}
		closedir(d);
	}
	if (total == 0) {
		fprintf(stderr, "replay: no corpus files ran\n");
		return 1;
	}
	printf("replay: %zu inputs ran without a crash\n", total);
	return 0;
}
