/* Closeness of doubles for the metrics tests: see assert_close.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>

#include "assert_close.h"

void assert_close(double got, double want, double rtol)
{
    if (!(fabs(got - want) <= rtol * fabs(want) + 1e-300)) {
        print_error("got %.17g want %.17g\n", got, want);
        fail();
    }
}
