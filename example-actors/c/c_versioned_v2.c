/* c_versioned_v2: version 2 of the versioned counter in C (versioned.h). */
#define VERSION 2
#include "versioned.h"
