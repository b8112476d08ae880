#include "transport/engine.h"
