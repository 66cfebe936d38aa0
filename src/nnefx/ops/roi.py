"""Region-of-interest operations (NNEF 1.0.5 §4.6).

``rois`` is (N, 2M) for M spatial dimensions (2-D rows ``(y0, x0, y1, x1)``); ``batch_index``
holds one batch item per RoI, as (N,) or (N, 1).
"""

from __future__ import annotations

from .registry import define

_ROI = """input: tensor<scalar>,
    rois: tensor<scalar>,
    batch_index: tensor<integer>,
    output_size: integer[]"""

avg_roi_pool = define("avg_roi_pool", "roi", f"""
fragment avg_roi_pool(
    {_ROI} )
-> ( output: tensor<scalar> );
""")

max_roi_pool = define("max_roi_pool", "roi", f"""
fragment max_roi_pool(
    {_ROI} )
-> ( output: tensor<scalar> );
""")

roi_resample = define("roi_resample", "roi", f"""
fragment roi_resample(
    {_ROI},
    method: string = 'symmetric' )
-> ( output: tensor<scalar> );
""")

# The spec's bodies pool with M-long ``size``/``stride`` arrays although pools require one
# entry per dimension; we prepend the batch and channel entries so the literal expansion
# passes the pool's own validity check (the evident intent).
avg_roi_align = define("avg_roi_align", "roi", f"""
fragment avg_roi_align(
    {_ROI},
    sampling_rate: integer[],
    resize_method: string = 'symmetric' )
-> ( output: tensor<scalar> )
{{
    size = [for i in range_of(output_size) yield output_size[i] * sampling_rate[i]];
    resized = roi_resample(input, rois, batch_index, output_size = size, method = resize_method);
    output = avg_pool(resized, size = [1,1] + sampling_rate, stride = [1,1] + sampling_rate);
}}
""", compound=True)

max_roi_align = define("max_roi_align", "roi", f"""
fragment max_roi_align(
    {_ROI},
    sampling_rate: integer[],
    resize_method: string = 'symmetric' )
-> ( output: tensor<scalar> )
{{
    size = [for i in range_of(output_size) yield output_size[i] * sampling_rate[i]];
    resized = roi_resample(input, rois, batch_index, output_size = size, method = resize_method);
    output = max_pool(resized, size = [1,1] + sampling_rate, stride = [1,1] + sampling_rate);
}}
""", compound=True)
