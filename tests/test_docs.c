/* The repository explains itself: every "docs/<file>.md §<n>" a source file cites names a
 * file in docs/ that has a section "## <n>." (docs/README.md, Conventions), and no source
 * cites the project specs that live outside the repository. Scans src, include, tools,
 * tests, bench, examples and scripts under EST_SOURCE_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static int g_refs, g_bad;

/* 1 when docs/<name> exists and has a line "## <section>." */
static int section_exists(const char *name, long section) {
  char path[4096], want[32];
  if (snprintf(path, sizeof path, "%s/docs/%s", EST_SOURCE_DIR, name) >= (int)sizeof path) return 0;
  size_t n;
  char *text = test_read_file(path, &n);
  if (!text) return 0;
  snprintf(want, sizeof want, "\n## %ld.", section);
  int found = strstr(text, want) != NULL;
  free(text);
  return found;
}

/* Checks every citation in one file's text; `path` for messages. */
static void check_text(const char *path, const char *text) {
  /* spelled in pieces so that this file does not cite them itself */
  static const char *const outside[] = {"bert_reference" ".md", "formats" ".md", "performance" ".md"};
  for (size_t k = 0; k < sizeof outside / sizeof *outside; k++)
    for (const char *p = strstr(text, outside[k]); p; p = strstr(p + 1, outside[k]))
      if (p - text < 5 || strncmp(p - 5, "docs/", 5) != 0) {
        print_error("%s cites %s, which is not in the repository\n", path, outside[k]);
        g_bad++;
      }
  for (const char *p = strstr(text, "docs/"); p; p = strstr(p + 1, "docs/")) {
    const char *name = p + 5, *e = name;
    while (islower((unsigned char)*e) || *e == '_') e++;
    if (strncmp(e, ".md", 3) != 0 || e == name) continue;
    char file[64];
    snprintf(file, sizeof file, "%.*s.md", (int)(e - name), name);
    const char *q = e + 3;
    g_refs++;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/docs/%s", EST_SOURCE_DIR, file);
    if (!est_file_exists(probe)) {
      print_error("%s cites docs/%s, which does not exist\n", path, file);
      g_bad++;
      continue;
    }
    /* " §3", " §3-§5", " §1, §4": each number must be a section of that file. */
    while (*q == ' ') q++;
    while (!strncmp(q, "\xc2\xa7", 2)) {
      char *end;
      long s = strtol(q + 2, &end, 10);
      if (end == q + 2) break;
      if (!section_exists(file, s)) {
        print_error("%s cites docs/%s §%ld, which has no section %ld\n", path, file, s, s);
        g_bad++;
      }
      q = end;
      if (*q == '-' || *q == ',') q++;
      while (*q == ' ') q++;
    }
  }
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  if (type != FTW_F) return 0;
  const char *base = strrchr(path, '/');
  if (base && !strcmp(base + 1, "test_docs.c")) return 0; /* its own test strings */
  /* hidden directories are git-ignored venvs (bench/peers/.venv): other projects' files */
  if (strstr(path + strlen(EST_SOURCE_DIR), "/.")) return 0;
  const char *dot = strrchr(path, '.');
  if (!dot || (strcmp(dot, ".c") && strcmp(dot, ".h") && strcmp(dot, ".md") && strcmp(dot, ".py") &&
               strcmp(dot, ".sh")))
    return 0;
  size_t n;
  char *text = test_read_file(path, &n);
  if (text) check_text(path, text);
  free(text);
  return 0;
}

static void test_citations_resolve(void **state) {
  (void)state;
  static const char *const dirs[] = {"src", "include", "tools", "tests", "bench", "examples", "scripts", "python"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", EST_SOURCE_DIR, dirs[i]);
    if (est_is_directory(dir)) assert_int_equal(nftw(dir, visit, 16, FTW_PHYS), 0);
  }
  char readme[4096];
  snprintf(readme, sizeof readme, "%s/README.md", EST_SOURCE_DIR);
  assert_int_equal(visit(readme, NULL, FTW_F, NULL), 0);
  /* the scan must have found the citations it is there to check */
  assert_true(g_refs > 50);
  assert_int_equal(g_bad, 0);
}

/* The checker itself: a good citation passes, a missing section or file and an outside
 * spec are each reported. */
static void test_checker_catches_bad_citations(void **state) {
  (void)state;
  int refs = g_refs, bad = g_bad;
  check_text("good", "see docs/tfrecord.md \xc2\xa7" "3 and docs/checkpoint.md \xc2\xa7" "2-\xc2\xa7" "5, "
                     "docs/encoding.md \xc2\xa7" "1, \xc2\xa7" "4");
  assert_int_equal(g_bad, bad);
  assert_int_equal(g_refs, refs + 3);
  check_text("bad", "docs/tfrecord.md \xc2\xa7" "99");
  assert_int_equal(g_bad, bad + 1);
  check_text("bad", "docs/nosuchfile.md");
  assert_int_equal(g_bad, bad + 2);
  check_text("bad", "(formats" ".md 3.2)");
  assert_int_equal(g_bad, bad + 3);
  g_refs = refs;
  g_bad = bad;
}

/* est/est.h says it includes everything public: every header of include/est is in it. */
static void test_est_h_includes_every_public_header(void **state) {
  (void)state;
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/include/est", EST_SOURCE_DIR);
  snprintf(path, sizeof path, "%s/est.h", dir);
  char *umbrella = test_read_file(path, NULL);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int headers = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".h") || !strcmp(e->d_name, "est.h")) continue;
    char want[600];
    snprintf(want, sizeof want, "#include \"est/%s\"", e->d_name);
    if (!strstr(umbrella, want)) fail_msg("include/est/est.h lacks %s", want);
    headers++;
  }
  closedir(d);
  assert_true(headers > 30);
  free(umbrella);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_est_h_includes_every_public_header),
      cmocka_unit_test(test_checker_catches_bad_citations),
      cmocka_unit_test(test_citations_resolve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
