! test_blas_f77.f90 -- libmmtune_blas through the Fortran ABI exactly as gfortran calls it:
! CHARACTER arguments of any length (their hidden lengths appended: 'Transpose' is as good as
! 'T'), padded leading dimensions, the program's own XERBLA (the shim finds it by name), and
! the library linked into the program rather than preloaded.  Checks C against a double
! reference, the rows between M and LDC untouched, and with mmtune_blas_stats which path the
! calls took.  MMTUNE_BLAS_THRESHOLD=0 requires the GPU for every call: without a GPU or
! driver the program stops with code 77 (skipped).
module seen
  implicit none
  character(len=32) :: seen_name = ''
  integer :: seen_info = 0, seen_len = 0, seen_calls = 0
end module seen

subroutine xerbla(srname, info)
  use seen
  implicit none
  character(len=*), intent(in) :: srname
  integer, intent(in) :: info
  seen_calls = seen_calls + 1
  seen_name = srname
  seen_len = len(srname)
  seen_info = info
end subroutine xerbla

program test_blas_f77
  use iso_c_binding
  use seen
  implicit none
  ! mmtune_blas_stats_t (mmtune_blas.h)
  type, bind(c) :: stats_t
    integer(c_int64_t) :: gpu_calls, cpu_calls, noop_calls, error_calls, gpu_fallbacks
    real(c_double) :: threshold
    integer(c_int) :: device, gpu_state, gpu_status, cpu_blas
  end type stats_t
  interface
    subroutine mmtune_blas_stats(s) bind(c, name='mmtune_blas_stats')
      import :: stats_t
      type(stats_t), intent(out) :: s
    end subroutine mmtune_blas_stats
  end interface
  integer, parameter :: m = 37, n = 29, k = 41, lda = 45, ldb = 50, ldc = 40
  ! mmt_status values (mmtune.h) that mean "no GPU here"
  integer, parameter :: no_driver = 5, no_device = 6
  character(len=12), parameter :: transa(4) = [character(len=12) :: 'No transpose', 'Transpose', &
                                               'n', 'conjugate']
  character(len=1), parameter :: transb(4) = ['N', 'N', 't', 'C']
  real :: a(lda, 41), b(ldb, 41), c(ldc, n), c0(ldc, n), alpha, beta
  double precision :: s, mag, want, tol
  character(len=16) :: threshold
  type(stats_t) :: before, after
  integer :: t, i, j, l, bad, env_len, env_status
  logical :: gpu_mode, ta, tb

  call get_environment_variable('MMTUNE_BLAS_THRESHOLD', threshold, env_len, env_status)
  gpu_mode = env_status == 0 .and. threshold == '0'
  bad = 0
  call mmtune_blas_stats(before)
  do t = 1, 4
    call random_number(a)
    call random_number(b)
    call random_number(c)
    a = a - 0.5
    b = b - 0.5
    c0 = c
    alpha = 0.75
    beta = merge(0.0, -1.25, t == 3)
    call sgemm(transa(t), transb(t), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    ta = t == 2 .or. t == 4
    tb = t == 3 .or. t == 4
    do j = 1, n
      do i = 1, m
        s = 0
        mag = 0
        do l = 1, k
          s = s + dble(merge(a(l, i), a(i, l), ta)) * dble(merge(b(j, l), b(l, j), tb))
          mag = mag + abs(dble(merge(a(l, i), a(i, l), ta)) * dble(merge(b(j, l), b(l, j), tb)))
        end do
        want = alpha * s
        if (beta /= 0) want = want + beta * dble(c0(i, j))
        tol = 4d0 * (k + 2) * epsilon(1.0) * (abs(alpha) * mag + abs(beta * c0(i, j)))
        if (abs(c(i, j) - want) > tol) then
          if (bad < 5) print '(a,2i4,a,i2,2(a,es14.6))', 'C(', i, j, ') case', t, ': ', &
                                                        c(i, j), ' want ', want
          bad = bad + 1
        end if
      end do
      do i = m + 1, ldc
        if (c(i, j) /= c0(i, j)) then
          if (bad < 5) print '(a,2i4,a)', 'padding', i, j, ' written'
          bad = bad + 1
        end if
      end do
    end do
  end do
  call mmtune_blas_stats(after)

  ! Argument errors: netlib's INFO, the routine name as netlib passes it ('SGEMM ', length 6).
  call sgemm('X', 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
  if (seen_calls /= 1 .or. seen_info /= 1 .or. seen_name /= 'SGEMM' .or. seen_len /= 6) then
    print *, 'xerbla saw ', seen_calls, seen_info, trim(seen_name), seen_len
    bad = bad + 1
  end if
  call sgemm('N', 'Transpose', m, n, k, alpha, a, m - 1, b, ldb, beta, c, ldc)
  if (seen_calls /= 2 .or. seen_info /= 8) then
    print *, 'xerbla saw ', seen_calls, seen_info, ' wanted INFO 8'
    bad = bad + 1
  end if

  print '(a,4i8,a,i3)', 'gpu cpu noop fallbacks:', after%gpu_calls - before%gpu_calls, &
    after%cpu_calls - before%cpu_calls, after%noop_calls - before%noop_calls, &
    after%gpu_fallbacks - before%gpu_fallbacks, '  gpu_state', after%gpu_state
  if (after%gpu_calls + after%cpu_calls - before%gpu_calls - before%cpu_calls /= 4) then
    print *, 'the shim did not compute the 4 calls'
    bad = bad + 1
  end if
  if (gpu_mode) then
    if (after%gpu_state /= 1) then
      print *, 'GPU unavailable: mmt_status', after%gpu_status
      if (after%gpu_status == no_driver .or. after%gpu_status == no_device) stop 77
      stop 1
    end if
    if (after%gpu_calls - before%gpu_calls /= 4) then
      print *, 'not every call ran on the GPU'
      bad = bad + 1
    end if
  else if (after%cpu_calls - before%cpu_calls /= 4) then
    print *, 'not every call ran on the CPU'
    bad = bad + 1
  end if
  if (bad /= 0) then
    print *, bad, ' failures'
    stop 1
  end if
  print *, 'passed'
end program test_blas_f77
