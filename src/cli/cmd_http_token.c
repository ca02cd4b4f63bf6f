/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum http-token [--rotate] [--json]`: shows gpumd's REST API bearer token, or replaces it
 * with a fresh random one (gpumd writes the token file, mode 0600, and uses the new token at
 * once; the old one stops working). Asks gpumd over its socket (protocol op "http_token"), so
 * only an admin (root or admin_group) may.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <gpum/error.h>

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out, "usage: gpum http-token [--rotate] [--json]\n"
               "\n"
               "Prints the bearer token of gpumd's REST API (docs/rest.md): send it as\n"
               "'Authorization: Bearer TOKEN'. Only root or a member of admin_group may.\n"
               "\n"
               "  --rotate   replace the token with a fresh random one (the old one stops\n"
               "             working at once) and print the new one\n"
               "  --json     print {\"token\", \"token_file\", \"rotated\"}\n"
               "\n"
               "Exit status: 0 on success, 1 when gpumd refused (not an admin, HTTP off) or is\n"
               "not running, 2 for usage errors.\n");
}

int cmd_http_token(gpum_config_t *cfg, int argc, char **argv) {
  bool rotate = false, as_json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--rotate"))
      rotate = true;
    else if (!strcmp(a, "--json"))
      as_json = true;
    else
      return cli_bad_option("http-token", a);
  }
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "http-token", 0, &c);
  if (code != 0)
    return code;
  char *reply = NULL;
  int rc = gpum_client_call_json(c, "http_token", rotate ? "{\"rotate\": true}" : NULL, &reply);
  gpum_client_close(c);
  if (rc != 0) {
    fprintf(stderr, "gpum http-token: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  json_t *j = json_loads(reply, 0, NULL);
  const char *tok = json_string_value(json_object_get(j, "token"));
  if (!tok) {
    fprintf(stderr, "gpum http-token: gpumd sent no token\n");
    code = CLI_EXIT_FAIL;
  } else if (as_json) {
    json_t *o = json_pack("{s:s, s:O?, s:b}", "token", tok, "token_file",
                          json_object_get(j, "token_file"), "rotated", rotate);
    char *text = o ? json_dumps(o, 0) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
  } else {
    printf("%s\n", tok);
    if (rotate)
      fprintf(stderr, "gpum http-token: rotated; the new token is in %s\n",
              json_string_value(json_object_get(j, "token_file")));
  }
  json_decref(j);
  free(reply);
  return code;
}
