# OpenMP shim: the same names compile and run serially when the build has no OpenMP.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define FX_HAVE_OPENMP 1
    #else
    #define FX_HAVE_OPENMP 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_num_procs(void) { return 1; }
    #endif
    """
    const int FX_HAVE_OPENMP
    int omp_get_max_threads() nogil
    int omp_get_num_procs() nogil
