/* c_versioned_v3: version 3 of the versioned counter in C (versioned.h). */
#define VERSION 3
#define BAD_MIGRATE
#include "versioned.h"
