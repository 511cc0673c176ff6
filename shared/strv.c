/* String vectors (see strv.h). */
#include "strv.h"

#include <stdlib.h>

int sbx_strv_push(char ***list, size_t *n, char *s)
{
	char **l = realloc(*list, (*n + 2) * sizeof *l);
	if (l == NULL) {
		free(s);
		return -1;
	}
	l[(*n)++] = s;
	l[*n] = NULL;
	*list = l;
	return 0;
}

void sbx_strv_free(char **l)
{
	for (char **p = l; p != NULL && *p != NULL; p++)
		free(*p);
	free(l);
}
