source devtools/gpu_env.sh; B=/tmp/b
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_GPU_TESTS=OFF -DCUXFER_BUILD_TESTS=OFF > /dev/null 2>&1; cmake --build $B -j16 --target cuxfer_shim > /dev/null 2>&1 || echo BUILD FAILED
for r in 1 2 3; do
 for v in none disabled observe_d0 observe_d16; do
  case $v in
   none) env= ;;
   disabled) env="CUXFER_DISABLE=1 LD_PRELOAD=$B/lib/libcuxfer.so" ;;
   observe_d0) env="CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0 LD_PRELOAD=$B/lib/libcuxfer.so CUXFER_OUTPUT_DIR=/tmp" ;;
   observe_d16) env="CUXFER_CUPTI=off LD_PRELOAD=$B/lib/libcuxfer.so CUXFER_OUTPUT_DIR=/tmp" ;;
  esac
  echo "$r $v $(env $env timeout 60 python3 devtools/torch_feed.py --loop-only 2>&1 | tail -1)"
 done
done 2>&1 | tee $OUT/log
