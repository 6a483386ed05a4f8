#include "rules.hpp"
