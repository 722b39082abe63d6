/* c_versioned_v1: version 1 of the versioned counter in C (versioned.h). */
#define VERSION 1
#include "versioned.h"
