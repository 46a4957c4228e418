/* backplane core: cleaning untrusted text for messages and logs. One
 * function for every source the core does not control (plugin names,
 * versions, vendors, report() and log() text; manifests; environment
 * values), so a hostile or broken source cannot move a terminal's cursor,
 * forge log lines with CR/LF, or put invalid UTF-8 into a message. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char* bp__text_clean(const char* text, char* out, size_t size) {
  size_t j = 0;
  if (!out || size == 0) return "";
  if (!text) text = "(null)";
  for (const unsigned char* p = (const unsigned char*)text; *p; ++p) {
    /* Room for the longest item (\xNN), "..." and the NUL. */
    if (j + 8 >= size) {
      if (size >= 4) {
        memcpy(out + (j < size - 4 ? j : size - 4), "...", 4);
      } else {
        out[0] = '\0';
      }
      return out;
    }
    if (*p >= 0x20 && *p < 0x7f)
      out[j++] = (char)*p;
    else
      j += (size_t)snprintf(out + j, size - j, "\\x%02x", *p);
  }
  out[j] = '\0';
  return out;
}

void bp__text_clean_array(char* text, size_t size) {
  char clean[512];
  if (!text || size == 0) return;
  text[size - 1] = '\0';
  bp__text_clean(text, clean, size < sizeof(clean) ? size : sizeof(clean));
  memcpy(text, clean, strlen(clean) + 1);
}
