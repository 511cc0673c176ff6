/* sbx_exclude_match against GNU tar's default --exclude behaviour (unanchored, '*' matches
 * '/', a matched directory excludes what is below it, "./x" anchors at the top). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "exclude.h"

struct c {
	const char *pattern, *name;
	int want;
};

static void table(void **state)
{
	(void)state;
	const struct c cases[] = {
	        {"node_modules", "node_modules", 1},
	        {"node_modules", "node_modules/x/y.js", 1},
	        {"node_modules", "a/b/node_modules/z", 1},
	        {"node_modules", "node_modules2", 0},
	        {"node_modules", "xnode_modules", 0},
	        {"./cache", "cache", 1},
	        {"./cache", "cache/blob", 1},
	        {"./cache", "a/cache", 0},
	        {"*.o", "x.o", 1},
	        {"*.o", "a/b/x.o", 1},
	        {"*.o", "x.obj", 0},
	        {"a/*.o", "a/x.o", 1},
	        {"a/*.o", "a/b/x.o", 1}, /* '*' matches '/' */
	        {"a/*.o", "z/a/x.o", 1}, /* unanchored */
	        {"a/*.o", "za/x.o", 0},
	        {"?.c", "x.c", 1},
	        {"?.c", "xy.c", 0},
	        {"[ab].txt", "b.txt", 1},
	        {"[!ab].txt", "b.txt", 0},
	        {"[!ab].txt", "c.txt", 1},
	        {"[a-c]x", "dir/bx", 1},
	        {"\\*", "*", 1},
	        {"\\*", "x", 0},
	        {"*", "anything/at/all", 1},
	        {"", "x", 0},
	        {"b", "a/b/c", 1},
	        {"a/b", "x/a/b/c", 1},
	        {"a/b", "a/bc", 0},
	        {"*cache*", "deep/in/my_cache_dir/f", 1},
	        {"[", "[", 1},
	        {"[", "a", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int got = sbx_exclude_match(cases[i].pattern, cases[i].name);
		if (got != cases[i].want)
			fail_msg("pattern '%s' name '%s': got %d want %d", cases[i].pattern,
			         cases[i].name, got, cases[i].want);
	}
}

/* The table agrees with GNU tar itself: build the tree, tar it with each pattern, list. */
static void agrees_with_gnu_tar(void **state)
{
	(void)state;
	if (system("tar --version 2>/dev/null | grep -q 'GNU tar'") != 0)
		skip();
	char dir[] = "/tmp/sbx-exclude-XXXXXX";
	assert_non_null(mkdtemp(dir));
	const char *files[] = {
	        "node_modules/x.js", "a/node_modules/y", "cache/blob", "a/cache/keep", "x.o",
	        "a/b/y.o",           "a/z.obj",          "src/main.c", "ab.txt",       NULL};
	char cmd[1024];
	for (int i = 0; files[i] != NULL; i++) {
		snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s/t/%s')\" && touch '%s/t/%s'",
		         dir, files[i], dir, files[i]);
		assert_int_equal(system(cmd), 0);
	}
	const char *patterns[] = {"node_modules", "./cache", "*.o", "a/*.o",
	                          "?b.txt",       "*cache*", "src", NULL};
	for (int p = 0; patterns[p] != NULL; p++) {
		snprintf(cmd, sizeof cmd,
		         "tar -C '%s/t' --exclude='%s' -cf - . | tar -tf - | grep -v '/$' | "
		         "sed 's|^\\./||' | sort",
		         dir, patterns[p]);
		FILE *f = popen(cmd, "r");
		char kept[4096] = "", line[512];
		while (fgets(line, sizeof line, f) != NULL)
			strcat(kept, line);
		pclose(f);
		for (int i = 0; files[i] != NULL; i++) {
			char want[300];
			snprintf(want, sizeof want, "%s\n", files[i]);
			int tar_kept = strstr(kept, want) != NULL;
			/* A file is excluded when it or any leading directory matches. */
			if (sbx_exclude_match(patterns[p], files[i]) == tar_kept)
				fail_msg("pattern '%s' file '%s': GNU tar %s it, sbx %s it",
				         patterns[p], files[i], tar_kept ? "kept" : "excluded",
				         tar_kept ? "excludes" : "keeps");
		}
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(table),
	        cmocka_unit_test(agrees_with_gnu_tar),
	};
	return cmocka_run_group_tests_name("exclude", tests, NULL, NULL);
}
