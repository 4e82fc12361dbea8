"""Fuzzer graphs that once exposed a bug, pinned as recipes (graph indices change with the catalogue).

Written by `draw_graph(seed, index)` (`relwrite.testing.fuzz`, then `relwrite.fuzz`) at commit 581b2db
(seeds 37 to 103: at the commit adding them); keyed by (seed, index).
"""

from numpy import array, empty, float16, float32, float64, inf, int8, int16, int32, int64, nan, uint8  # noqa: F401

from relwrite.testing.fuzz import Recipe, RecipeStep, Ref

CASES = {
    (11, 945): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x0", "dtype": "float64", "shape": (None, None)},
                ),
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x1", "dtype": "float64", "shape": (1, None)},
                ),
                RecipeStep(kind="call", op="le", args=(Ref(index=0), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="log", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="mean", args=(Ref(index=3),), params={"axis": (0, 1)}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "float64", "shape": (3,)}
                ),
                RecipeStep(kind="call", op="sigmoid", args=(Ref(index=5),), params={}),
                RecipeStep(kind="call", op="log", args=(Ref(index=6),), params={}),
                RecipeStep(
                    kind="call",
                    op="composite",
                    args=(Ref(index=6), Ref(index=4), Ref(index=7)),
                    params={
                        "inner": Recipe(
                            steps=[
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i0", "dtype": "float64", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i1", "dtype": "float16", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i2", "dtype": "float64", "shape": ()},
                                ),
                                RecipeStep(kind="call", op="op**", args=(Ref(index=2), -inf), params={}),
                                RecipeStep(kind="call", op="abs", args=(Ref(index=2),), params={}),
                                RecipeStep(
                                    kind="call", op="op-", args=(Ref(index=3), Ref(index=4)), params={}
                                ),
                            ],
                            outputs=[5],
                            single=False,
                        )
                    },
                ),
            ],
            outputs=[8],
            single=True,
        ),
        [
            {
                0: array([[-0.4438624849341839, -0.6277061282096378, 0.3274585223356797]]),
                1: array([[-13.81002593792138]]),
                5: array([26.950681417108267, 30.342292442616678, 19.736315902957855]),
            },
            {
                0: array([[3.634346357466950e-290, -5.527472978758147e105, -1.014840067664409e112]]),
                1: array([[-4.482089809760636e83]]),
                5: array([-9.730604578373236e288, -5.497590789395790e-143, -1.422627126568348e062]),
            },
            {
                0: array([[-7.5000000000000000e002, 1.7976931348623157e308, -1.0000000000000000e000]]),
                1: array([[1.0e300]]),
                5: array([-7.5000000000000000e002, -7.5000000000000000e002, -1.7976931348623157e308]),
            },
            {
                0: array([[4.898080242023377, 65.3638686396661, 21.85758873444339]]),
                1: array([[-1.5479754329146147]]),
                5: array([0.11421927487648818, 0.9606876916171886, -0.9400436630601003]),
            },
        ],
    ),
    (11, 5157): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x1", "dtype": "float64", "shape": (4, 4)}
                ),
                RecipeStep(kind="call", op="exp", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="sum", args=(Ref(index=1),), params={"axis": (0, 1)}),
                RecipeStep(kind="call", op="log", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="mul", args=(Ref(index=1), Ref(index=3)), params={}),
                RecipeStep(kind="call", op="log", args=(Ref(index=4),), params={}),
                RecipeStep(kind="call", op="op/", args=(Ref(index=1), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="cast", args=(Ref(index=3),), params={"dtype": "float32"}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x5", "dtype": "float32", "shape": (3, 3)}
                ),
                RecipeStep(
                    kind="call",
                    op="gemm",
                    args=(Ref(index=8), Ref(index=7), Ref(index=8), Ref(index=8), Ref(index=7)),
                    params={},
                ),
            ],
            outputs=[9, 5, 6],
            single=False,
        ),
        [
            {
                0: array(
                    [
                        [
                            7.2157919125696326e00,
                            1.2312926923121172e00,
                            7.9537906576651862e-01,
                            -3.4412668206926117e-01,
                        ],
                        [
                            -6.9123393231454255e-01,
                            6.6641972818509743e-01,
                            4.0033325460261082e00,
                            -2.0023335002806446e00,
                        ],
                        [
                            1.2693874868488266e00,
                            2.7803192688096496e00,
                            1.1775976267834580e-01,
                            2.3782454867946616e00,
                        ],
                        [
                            3.2056794491839771e00,
                            -1.6672841220527479e00,
                            8.3081028394071162e-04,
                            -3.6375097812414912e00,
                        ],
                    ]
                ),
                8: array(
                    [
                        [-2.7678313, 24.498184, 23.287363],
                        [66.29899, -29.565317, -45.07156],
                        [19.320606, -12.477353, 8.620887],
                    ],
                    dtype=float32,
                ),
            },
            {
                0: array(
                    [
                        [
                            4.3880367319115267e-058,
                            2.7558277307068080e-083,
                            -4.3345854549071578e073,
                            2.0811074162447088e016,
                        ],
                        [
                            -1.0866647649723568e-263,
                            -1.5319096535303739e193,
                            -2.1150868795621384e-183,
                            -1.3195934129132806e-254,
                        ],
                        [
                            -1.5824129216605683e261,
                            3.8119010810198541e-299,
                            -1.2630846409662342e250,
                            8.5454665950006407e263,
                        ],
                        [
                            2.0719389565664417e-112,
                            3.9541967201427376e-010,
                            2.2768781579050329e299,
                            1.0810738706715939e272,
                        ],
                    ]
                ),
                8: array(
                    [
                        [7.7438242e-18, -1.1524817e10, -3.7793960e-13],
                        [-1.2418954e-27, -7.6463298e-09, -4.3307246e-14],
                        [-7.6145823e-13, 7.2174546e24, 2.9416701e14],
                    ],
                    dtype=float32,
                ),
            },
            {
                0: array(
                    [
                        [
                            2.2250738585072014e-308,
                            1.0000000000000000e-300,
                            -7.5000000000000000e002,
                            2.2250738585072014e-308,
                        ],
                        [
                            5.0000000000000000e-001,
                            -1.0000000000000001e300,
                            -0.0000000000000000e000,
                            0.0000000000000000e000,
                        ],
                        [
                            4.9406564584124654e-324,
                            2.0000000000000000e000,
                            -1.0000000000000001e300,
                            -7.5000000000000000e002,
                        ],
                        [
                            7.0000000000000000e002,
                            3.0000000000000000e001,
                            7.0000000000000000e002,
                            -0.0000000000000000e000,
                        ],
                    ]
                ),
                8: array(
                    [
                        [5.0000000e-01, -1.0000000e30, -0.0000000e00],
                        [1.0000000e00, 2.0000000e00, -1.0000000e00],
                        [3.4028235e38, -1.0400000e02, 1.1754944e-38],
                    ],
                    dtype=float32,
                ),
            },
            {
                0: array(
                    [
                        [
                            -1.6874850899822196e001,
                            -0.0000000000000000e000,
                            3.2568188883702462e001,
                            -1.7976931348623157e308,
                        ],
                        [
                            -1.5720006000185522e001,
                            6.3142271786693165e000,
                            1.2599544924427120e001,
                            -1.0197844889997656e001,
                        ],
                        [4.3130510208967181e001, inf, 8.7749974211378596e000, 2.2250738585072014e-308],
                        [
                            1.4822446637631650e000,
                            -1.0000000000000001e300,
                            -1.7976931348623157e308,
                            1.0000000000000000e-300,
                        ],
                    ]
                ),
                8: array(
                    [[88.0, -0.8600241, -2.3402104], [-1.4331208, 2.0, 1.0], [-0.35319564, -1.0, nan]],
                    dtype=float32,
                ),
            },
        ],
    ),
    (11, 7291): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x1", "dtype": "float32", "shape": (5,)}
                ),
                RecipeStep(kind="call", op="tanh", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="sqr", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="sqrt", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="dot", args=(Ref(index=1), Ref(index=2)), params={}),
                RecipeStep(kind="call", op="cast", args=(Ref(index=3),), params={"dtype": "float64"}),
                RecipeStep(
                    kind="call",
                    op="mul",
                    args=(Ref(index=4), Ref(index=4), Ref(index=4), Ref(index=5)),
                    params={},
                ),
            ],
            outputs=[6],
            single=False,
        ),
        [
            {0: array([1.0750532, 1.3174634, -1.3254583, -8.764255, -4.5182004], dtype=float32)},
            {
                0: array(
                    [6.6404193e-29, -1.5608864e08, 1.6583264e25, 2.7838313e-21, 6.6425977e02], dtype=float32
                )
            },
            {0: array([-1.0e00, -1.0e00, 1.0e-45, 1.0e30, -0.0e00], dtype=float32)},
            {0: array([-3.338289, -0.58084893, 2.741847, -3.2323642, -2.0661917], dtype=float32)},
        ],
    ),
    (11, 9851): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x4", "dtype": "float64", "shape": (None, None)},
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x5", "dtype": "float64", "shape": (4,)}
                ),
                RecipeStep(kind="call", op="sigmoid", args=(Ref(index=1),), params={}),
                RecipeStep(kind="call", op="neg", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="log1p", args=(Ref(index=3),), params={}),
                RecipeStep(kind="call", op="sum", args=(Ref(index=2),), params={"axis": (0,)}),
                RecipeStep(kind="call", op="op/", args=(Ref(index=5), Ref(index=4)), params={}),
                RecipeStep(kind="call", op="op*", args=(Ref(index=4), Ref(index=6)), params={}),
                RecipeStep(
                    kind="call",
                    op="composite",
                    args=(Ref(index=0),),
                    params={
                        "inner": Recipe(
                            steps=[
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i0", "dtype": "float64", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="call", op="neq", args=(Ref(index=0), Ref(index=0)), params={}
                                ),
                                RecipeStep(
                                    kind="call", op="pow", args=(Ref(index=0), Ref(index=1)), params={}
                                ),
                                RecipeStep(kind="call", op="add", args=(-1, Ref(index=0)), params={}),
                            ],
                            outputs=[3],
                            single=False,
                        )
                    },
                ),
                RecipeStep(
                    kind="call",
                    op="mul",
                    args=(Ref(index=7), Ref(index=5), Ref(index=5), Ref(index=4)),
                    params={},
                ),
            ],
            outputs=[9, 8],
            single=False,
        ),
        [
            {
                0: array(
                    [
                        [0.47788369436589156, -1.5137432802682036, -4.1402084412526765],
                        [-1.8909253178262577, -0.3905451051979397, -0.628347358900213],
                        [-2.387412806856159, -5.281518981859448, 2.1028935757591785],
                    ]
                ),
                1: array([0.07143168873563317, -2.0504646377188904, 0.6851044844125467, 0.6055582867374268]),
            },
            {
                0: array(
                    [
                        [-6.5144201997818707e236, -6.7661418078264622e099, 8.6338125787739444e-034],
                        [-2.6736230743157064e-086, -5.7925855312720040e-184, -1.0196723972095447e229],
                        [2.6007175449089919e286, -1.6543854451900854e299, 1.3322504101053141e242],
                    ]
                ),
                1: array(
                    [
                        -8.8032362997454472e073,
                        1.2506595517707355e-014,
                        9.0910895827539095e058,
                        3.4041297500036294e219,
                    ]
                ),
            },
            {
                0: array(
                    [[1.0e000, 1.0e000, 0.0e000], [0.0e000, 1.0e300, 5.0e-001], [-1.0e000, 5.0e-001, 1.0e000]]
                ),
                1: array([2.0e000, 5.0e-324, -1.0e000, 1.0e000]),
            },
            {
                0: array(
                    [
                        [nan, 2.2951810847093970e001, 2.3908667658249058e001],
                        [2.8876490489196929e001, -3.2609593305770488e001, 1.0000000000000001e300],
                        [1.7976931348623157e308, 9.5940999706395527e000, 0.0000000000000000e000],
                    ]
                ),
                1: array([2.598484157982637, 2.0224189864461994, -2.770100639328723, 3.2456259170453774]),
            },
        ],
    ),
    (11, 6666): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x0", "dtype": "uint8", "shape": (5, None)}
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "int32", "shape": (None,)}
                ),
                RecipeStep(kind="call", op="abs", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="sigmoid", args=(Ref(index=1),), params={}),
                RecipeStep(kind="call", op="neg", args=(Ref(index=3),), params={}),
                RecipeStep(kind="call", op="log1p", args=(Ref(index=4),), params={}),
                RecipeStep(kind="call", op="op-x", args=(Ref(index=5),), params={}),
                RecipeStep(kind="call", op="sin", args=(Ref(index=6),), params={}),
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x3", "dtype": "float64", "shape": (None, None)},
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x4", "dtype": "float64", "shape": (None,)}
                ),
                RecipeStep(
                    kind="call", op="ger", args=(Ref(index=8), 1e-300, Ref(index=7), Ref(index=9)), params={}
                ),
            ],
            outputs=[10, 2],
            single=False,
        ),
        [
            {
                0: array(
                    [[9, 8, 0, 9], [6, 7, 0, 6], [8, 4, 10, 1], [2, 8, 8, 9], [7, 2, 4, 6]], dtype=uint8
                ),
                1: array([4, 1, -3, -5], dtype=int32),
                8: array(
                    [
                        [
                            14.04828551327592,
                            -4.024546639835089,
                            82.17926287100325,
                            -2.4914027905837686,
                            23.268584164127464,
                        ]
                    ]
                ),
                9: array(
                    [
                        -1.845279956305622,
                        -20.801977742181528,
                        -12.865954881217755,
                        22.95827930789971,
                        -28.332706503487355,
                    ]
                ),
            },
            {
                0: array(
                    [
                        [52, 219, 128, 250],
                        [44, 193, 117, 202],
                        [135, 51, 88, 136],
                        [254, 47, 106, 211],
                        [7, 210, 77, 1],
                    ],
                    dtype=uint8,
                ),
                1: array([-1632570686, 1833272457, -235529226, 1314799853], dtype=int32),
                8: array(
                    [
                        [
                            -4.4885192202096785e-003,
                            -1.4283311590413239e256,
                            -5.8275570000208308e-256,
                            1.6498597339584989e-230,
                            -2.7324670143996630e262,
                        ]
                    ]
                ),
                9: array(
                    [
                        1.2659877986435408e-016,
                        -3.2385233894641100e-165,
                        -9.1973693383386925e-114,
                        3.2825276644591805e100,
                        -1.1905121641572852e272,
                    ]
                ),
            },
            {
                0: array(
                    [[0, 1, 0, 1], [254, 255, 254, 0], [1, 2, 1, 2], [0, 1, 1, 1], [255, 0, 1, 2]],
                    dtype=uint8,
                ),
                1: array([0, -2147483647, 0, 0], dtype=int32),
                8: array(
                    [
                        [
                            1.7976931348623157e308,
                            4.9406564584124654e-324,
                            inf,
                            1.0000000000000000e-300,
                            1.0000000000000000e-300,
                        ]
                    ]
                ),
                9: array([-7.5e002, 7.0e002, 1.0e-300, -0.0e000, 7.0e002]),
            },
            {
                0: array(
                    [[1, 10, 6, 6], [1, 2, 0, 2], [1, 0, 8, 255], [2, 254, 254, 5], [0, 1, 3, 2]], dtype=uint8
                ),
                1: array([-4, 0, -5, -6], dtype=int32),
                8: array(
                    [
                        [
                            3.0875802716093625e000,
                            3.5267779463048665e000,
                            1.2085230807824754e-001,
                            1.0000000000000000e-300,
                            6.0196990730896234e000,
                        ]
                    ]
                ),
                9: array(
                    [
                        inf,
                        -7.5000000000000000e02,
                        1.7722542135338375e00,
                        -6.9492479511080985e-01,
                        -6.7728283028436670e-02,
                    ]
                ),
            },
        ],
    ),
    (7, 853): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="constant",
                    op="",
                    args=(),
                    params={
                        "value": array([[1.0645089], [1.0917329], [-0.6846483], [0.22673656]], dtype=float32),
                        "dtype": None,
                    },
                ),
                RecipeStep(kind="call", op="gt", args=(1, Ref(index=0)), params={}),
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x2", "dtype": "float64", "shape": (4, None)},
                ),
                RecipeStep(kind="call", op="fill", args=(Ref(index=2), Ref(index=2)), params={}),
                RecipeStep(
                    kind="call",
                    op="composite",
                    args=(Ref(index=3), Ref(index=0)),
                    params={
                        "inner": Recipe(
                            steps=[
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i0", "dtype": "float64", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i1", "dtype": "float32", "shape": ()},
                                ),
                                RecipeStep(kind="call", op="exp", args=(Ref(index=1),), params={}),
                                RecipeStep(
                                    kind="call", op="op**", args=(Ref(index=0), Ref(index=2)), params={}
                                ),
                            ],
                            outputs=[3],
                            single=False,
                        )
                    },
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x3", "dtype": "uint8", "shape": (None,)}
                ),
                RecipeStep(kind="call", op="maximum", args=(Ref(index=5), Ref(index=4)), params={}),
                RecipeStep(kind="call", op="true_div", args=(Ref(index=6), inf), params={}),
                RecipeStep(kind="call", op="mul", args=(-1, Ref(index=5), Ref(index=4)), params={}),
            ],
            outputs=[8, 1, 7],
            single=False,
        ),
        [
            {
                2: array(
                    [
                        [0.20514892592156775, 1.400175548180015, 1.162814943647735, 2.1293403442937984],
                        [8.409059443975526, 7.322079379331618, 0.31410107689111183, 1.783376705077412],
                        [-0.6138833076433364, 2.9501789719759155, -1.6948676492193036, 3.342851769942507],
                        [5.611603958118548, -2.418455991923458, 1.553542385582725, 5.305543315101535],
                    ]
                ),
                5: array([0], dtype=uint8),
            },
            {
                2: array(
                    [
                        [
                            -2.3856218974214986e162,
                            4.0890700019086772e000,
                            -4.6834657793581773e-042,
                            -6.2527203886065315e147,
                        ],
                        [
                            1.1915229029106462e092,
                            -2.7967403679357390e200,
                            1.7529609566951382e012,
                            1.4028146873554447e-079,
                        ],
                        [
                            -6.1521316840310532e181,
                            2.1287128639647745e177,
                            -5.3864182362520399e-107,
                            -2.6137221603934918e-219,
                        ],
                        [
                            -6.1067772408312532e-077,
                            -1.9148249061352039e-278,
                            1.6401316011204880e015,
                            -8.9842443488630145e181,
                        ],
                    ]
                ),
                5: array([147], dtype=uint8),
            },
            {
                2: array(
                    [
                        [5.0e-001, 1.0e-008, 1.0e-008, -inf],
                        [0.0e000, 1.0e300, -0.0e000, inf],
                        [-1.0e000, -inf, 1.0e-008, -7.5e002],
                        [inf, -1.0e300, 1.0e-008, inf],
                    ]
                ),
                5: array([254], dtype=uint8),
            },
            {
                2: array(
                    [
                        [nan, 1.3542959329142297e000, -1.3492339585140273e-001, 1.0000000000000000e000],
                        [1.1997259510398747e-001, -1.4914975333299900e000, inf, -1.7976931348623157e308],
                        [
                            2.5119508333580414e000,
                            -1.7774229724491214e-001,
                            1.3769902184419145e000,
                            -5.4881616920873988e000,
                        ],
                        [inf, -3.3619889677612109e000, -4.3978852757756073e000, -8.9190025695061848e-001],
                    ]
                ),
                5: array([5], dtype=uint8),
            },
        ],
    ),
    (37, 740): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "float64", "shape": (4,)}
                ),
                RecipeStep(kind="constant", op="", args=(), params={"value": 1, "dtype": None}),
                RecipeStep(kind="call", op="add", args=(Ref(index=1), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="expm1", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="log1p", args=(Ref(index=3),), params={}),
                RecipeStep(kind="call", op="add", args=(Ref(index=2), Ref(index=4)), params={}),
                RecipeStep(kind="call", op="add", args=(Ref(index=0), Ref(index=5)), params={}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x3", "dtype": "int64", "shape": ()}
                ),
                RecipeStep(kind="call", op="op*", args=(Ref(index=7), Ref(index=6)), params={}),
                RecipeStep(kind="call", op="op<", args=(Ref(index=8), Ref(index=6)), params={}),
            ],
            outputs=[9],
            single=False,
        ),
        [
            {
                0: array([0.36250168208168204, -1.0014431822343104, 0.4810250668300254, 1.4065565865749419]),
                7: array(0),
            },
            {
                0: array(
                    [
                        -8.3275165598224330e211,
                        2.8963687568341984e-126,
                        1.7807095161650299e020,
                        -1.0655035121805513e253,
                    ]
                ),
                7: array(2959076249183648973),
            },
            {
                0: array(
                    [
                        1.0000000000000001e300,
                        1.7976931348623157e308,
                        -0.0000000000000000e000,
                        0.0000000000000000e000,
                    ]
                ),
                7: array(2),
            },
            {
                0: array(
                    [
                        -4.786393645437991e000,
                        -7.500000000000000e002,
                        -3.892706811916136e000,
                        1.000000000000000e-300,
                    ]
                ),
                7: array(-6),
            },
        ],
    ),
    (41, 728): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x3", "dtype": "float64", "shape": (1,)}
                ),
                RecipeStep(kind="call", op="log1mexp", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="true_div", args=(1, Ref(index=1)), params={}),
            ],
            outputs=[2, 2],
            single=False,
        ),
        [
            {0: array([0.8970856335073266])},
            {0: array([-1.679894869741554e237])},
            {0: array([30.0])},
            {0: array([1.2560143459566844])},
        ],
    ),
    (43, 1401): (
        Recipe(
            steps=[
                RecipeStep(kind="constant", op="", args=(), params={"value": array([0]), "dtype": None}),
                RecipeStep(kind="call", op="mul", args=(Ref(index=0), Ref(index=0), Ref(index=0)), params={}),
                RecipeStep(kind="call", op="minimum", args=(Ref(index=0), Ref(index=0)), params={}),
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x1", "dtype": "int32", "shape": (None, None)},
                ),
                RecipeStep(kind="call", op="fill", args=(Ref(index=0), Ref(index=3)), params={}),
                RecipeStep(kind="call", op="op**", args=(Ref(index=1), 1), params={}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "int32", "shape": (1,)}
                ),
                RecipeStep(
                    kind="call",
                    op="add",
                    args=(Ref(index=1), Ref(index=6), Ref(index=3), Ref(index=5)),
                    params={},
                ),
                RecipeStep(
                    kind="call",
                    op="add",
                    args=(Ref(index=6), Ref(index=0), Ref(index=4), Ref(index=0)),
                    params={},
                ),
                RecipeStep(kind="call", op="astype", args=(Ref(index=8),), params={"dtype": "float64"}),
            ],
            outputs=[9, 2, 7],
            single=False,
        ),
        [
            {3: array([[6], [6], [6], [-2], [-4]], dtype=int32), 6: array([6], dtype=int32)},
            {
                3: array(
                    [[1244246725], [-1444597489], [-1257249877], [1046187879], [1560841792]], dtype=int32
                ),
                6: array([-515386050], dtype=int32),
            },
            {
                3: array([[-2147483648], [-2147483648], [1], [0], [0]], dtype=int32),
                6: array([2147483647], dtype=int32),
            },
            {3: array([[-5], [-3], [2], [-4], [-6]], dtype=int32), 6: array([-4], dtype=int32)},
        ],
    ),
    (47, 675): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x0", "dtype": "bool", "shape": (1,)}
                ),
                RecipeStep(
                    kind="constant",
                    op="",
                    args=(),
                    params={
                        "value": array(
                            [
                                [
                                    1.3487038099107785e001,
                                    1.0000000000000000e-300,
                                    -1.8546516053844890e001,
                                    2.0000000000000000e000,
                                    5.7066346864721758e001,
                                ],
                                [
                                    nan,
                                    -7.5000000000000000e002,
                                    -7.3374734649005342e000,
                                    -0.0000000000000000e000,
                                    3.0000000000000000e001,
                                ],
                                [
                                    5.3832495935168346e001,
                                    5.0000000000000000e-001,
                                    inf,
                                    -3.0189726887117736e000,
                                    1.5082443015210649e000,
                                ],
                                [
                                    2.0000000000000000e000,
                                    1.2359774043359794e001,
                                    2.3452992378620145e001,
                                    -1.8257791888419688e000,
                                    -1.0000000000000000e000,
                                ],
                                [
                                    2.0000000000000000e000,
                                    1.0000000000000000e-300,
                                    -1.0000000000000001e300,
                                    -1.7976931348623157e308,
                                    4.1203349439874231e001,
                                ],
                            ]
                        ),
                        "dtype": None,
                    },
                ),
                RecipeStep(kind="call", op="eq", args=(Ref(index=1), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="log1mexp", args=(Ref(index=0),), params={}),
                RecipeStep(kind="call", op="op**", args=(Ref(index=3), 0.5), params={}),
                RecipeStep(kind="call", op="exp", args=(Ref(index=4),), params={}),
                RecipeStep(kind="call", op="op/", args=(Ref(index=5), 300), params={}),
            ],
            outputs=[6, 2],
            single=False,
        ),
        [{0: array([False])}, {0: array([True])}, {0: array([False])}, {0: array([False])}],
    ),
    (53, 748): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x2", "dtype": "float64", "shape": (4, None)},
                ),
                RecipeStep(kind="call", op="log_softmax", args=(Ref(index=0),), params={"axis": -2}),
                RecipeStep(kind="call", op="op/", args=(Ref(index=1), 3), params={}),
                RecipeStep(kind="call", op="log1mexp", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="eq", args=(Ref(index=3), 5e-324), params={}),
                RecipeStep(kind="call", op="op-abs", args=(Ref(index=3),), params={}),
                RecipeStep(kind="call", op="neq", args=(Ref(index=5), Ref(index=5)), params={}),
                RecipeStep(kind="call", op="log_softmax", args=(Ref(index=3),), params={"axis": 0}),
            ],
            outputs=[7, 4, 6],
            single=False,
        ),
        [
            {
                0: array(
                    [
                        [88.32542134224863, 14.451309751838853, -4.106496834087353, 2.372689719734571],
                        [-12.313549994574887, 44.57119320978169, 35.86144338647983, 4.593365626567671],
                        [-16.173611786006553, -17.92935180745044, 75.06584782436428, 9.483381679311393],
                        [25.684834542525973, 6.679722986730819, 0.7108359848179603, 46.834669330808104],
                    ]
                )
            },
            {
                0: array(
                    [
                        [
                            -3.7576938326548084e109,
                            -3.6815587617407304e-047,
                            2.5401397662033188e-262,
                            5.5026347265837749e-296,
                        ],
                        [
                            -9.2090205326074354e285,
                            7.9992696110760130e134,
                            -3.9784664363500922e070,
                            7.1452511958960063e-130,
                        ],
                        [
                            9.3678814501261652e144,
                            2.6812975819243566e-126,
                            -9.2399193618900564e-195,
                            2.5042613338018520e-051,
                        ],
                        [
                            7.9824917428891074e-027,
                            -2.6883532122415017e277,
                            -6.1603952070690449e-172,
                            7.7966065373977762e014,
                        ],
                    ]
                )
            },
            {
                0: array(
                    [
                        [5.0000000000000000e-001, -1.0000000000000000e000, -1.0000000000000000e000, nan],
                        [
                            -1.7976931348623157e308,
                            -7.5000000000000000e002,
                            5.0000000000000000e-001,
                            7.0000000000000000e002,
                        ],
                        [-inf, 1.0000000000000000e000, -1.0000000000000001e300, 4.9406564584124654e-324],
                        [
                            1.0000000000000000e-300,
                            0.0000000000000000e000,
                            1.0000000000000000e-008,
                            -1.7976931348623157e308,
                        ],
                    ]
                )
            },
            {
                0: array(
                    [
                        [3.2316695571014815e000, nan, -1.3647412828752570e-001, 1.9100015768603971e000],
                        [-9.8503915577650014e-001, 5.2832781361374979e000, inf, 1.2050292147997630e000],
                        [
                            -7.3864033856299094e-001,
                            -5.4144811219628437e000,
                            5.0000000000000000e-001,
                            1.7976931348623157e308,
                        ],
                        [
                            2.7872241196208898e000,
                            -1.2270873309754776e-001,
                            -4.3095944392754948e000,
                            -3.4135690750811358e000,
                        ],
                    ]
                )
            },
        ],
    ),
    (61, 1292): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="constant",
                    op="",
                    args=(),
                    params={
                        "value": array([[-6.276328583513404e-001], [1.000000000000000e-300]]),
                        "dtype": None,
                    },
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x4", "dtype": "int8", "shape": (5, 5)}
                ),
                RecipeStep(kind="call", op=".dot", args=(Ref(index=1), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="log_softmax", args=(Ref(index=2),), params={"axis": 0}),
                RecipeStep(kind="call", op="abs", args=(Ref(index=0),), params={}),
                RecipeStep(
                    kind="constant",
                    op="",
                    args=(),
                    params={
                        "value": array(
                            [
                                [2, 0, 1, -2, -4],
                                [2147483646, -2147483647, -1, 2147483646, -1],
                                [-2147483647, -2, -2, -1, 2147483647],
                                [-5, -1, -2147483648, 5, 0],
                                [-2147483648, -1, 4, -2147483647, 4],
                            ],
                            dtype=int32,
                        ),
                        "dtype": None,
                    },
                ),
                RecipeStep(kind="call", op="op*", args=(Ref(index=3), Ref(index=5)), params={}),
                RecipeStep(kind="call", op="le", args=(Ref(index=0), Ref(index=4)), params={}),
            ],
            outputs=[7, 6],
            single=False,
        ),
        [
            {
                1: array(
                    [
                        [1, 6, 1, -3, 1],
                        [4, 0, 3, 1, 3],
                        [-4, -6, 2, 0, -6],
                        [-2, 0, -6, 3, -6],
                        [-1, 5, -6, -6, -2],
                    ],
                    dtype=int8,
                )
            },
            {
                1: array(
                    [
                        [-47, -98, 99, 30, 59],
                        [-82, 96, -127, -126, -115],
                        [-99, 106, -7, -40, 51],
                        [111, -119, 65, 41, 103],
                        [-24, 92, 74, 42, -82],
                    ],
                    dtype=int8,
                )
            },
            {
                1: array(
                    [
                        [1, 0, -127, 2, 2],
                        [1, 127, -1, 126, -1],
                        [1, 0, 1, -1, -127],
                        [127, 127, 2, -127, 2],
                        [-127, -128, 1, 1, -2],
                    ],
                    dtype=int8,
                )
            },
            {
                1: array(
                    [
                        [3, -1, 127, 1, 4],
                        [0, -127, 2, 126, 127],
                        [-4, 0, -1, 1, -5],
                        [4, -1, 0, 3, 3],
                        [-5, 6, 5, -2, 3],
                    ],
                    dtype=int8,
                )
            },
        ],
    ),
    (89, 86): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x2", "dtype": "float64", "shape": (None, None)},
                ),
                RecipeStep(
                    kind="constant",
                    op="",
                    args=(),
                    params={"value": array([[True, False], [True, False]]), "dtype": None},
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x3", "dtype": "float32", "shape": ()}
                ),
                RecipeStep(kind="call", op="op*", args=(Ref(index=2), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="min", args=(Ref(index=3),), params={"axis": None}),
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x4", "dtype": "float64", "shape": (None, 0)},
                ),
                RecipeStep(kind="call", op="dot", args=(Ref(index=5), Ref(index=0)), params={}),
                RecipeStep(kind="call", op=".max", args=(Ref(index=5),), params={"axis": (0,)}),
                RecipeStep(kind="call", op="zeros_like", args=(Ref(index=7),), params={}),
                RecipeStep(kind="call", op="transpose", args=(Ref(index=8),), params={}),
                RecipeStep(kind="call", op="op>", args=(Ref(index=9), Ref(index=8)), params={}),
            ],
            outputs=[10, 4, 6],
            single=False,
        ),
        [
            {
                0: empty((0, 0), dtype=float64),
                2: array(2.2680144, dtype=float32),
                5: empty((2, 0), dtype=float64),
            },
            {
                0: empty((0, 0), dtype=float64),
                2: array(-7.417682e08, dtype=float32),
                5: empty((2, 0), dtype=float64),
            },
            {
                0: empty((0, 0), dtype=float64),
                2: array(-inf, dtype=float32),
                5: empty((2, 0), dtype=float64),
            },
            {
                0: empty((0, 0), dtype=float64),
                2: array(-1.1179814, dtype=float32),
                5: empty((2, 0), dtype=float64),
            },
        ],
    ),
    (97, 445): (
        Recipe(
            steps=[
                RecipeStep(kind="input", op="", args=(), params={"name": "x0", "dtype": "int8", "shape": ()}),
                RecipeStep(kind="call", op="abs", args=(Ref(index=0),), params={}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x1", "dtype": "float32", "shape": ()}
                ),
                RecipeStep(
                    kind="call",
                    op="mul",
                    args=(Ref(index=1), Ref(index=1), Ref(index=2), Ref(index=2)),
                    params={},
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "float32", "shape": (3,)}
                ),
                RecipeStep(
                    kind="call",
                    op="add",
                    args=(Ref(index=3), Ref(index=2), Ref(index=4), Ref(index=3)),
                    params={},
                ),
                RecipeStep(kind="call", op=".dot", args=(Ref(index=5), Ref(index=4)), params={}),
                RecipeStep(kind="call", op="cast", args=(Ref(index=6),), params={"dtype": "int64"}),
            ],
            outputs=[7],
            single=True,
        ),
        [
            {
                0: array(3, dtype=int8),
                2: array(0.82761383, dtype=float32),
                4: array([-5.9653816, 52.051647, 9.829117], dtype=float32),
            },
            {
                0: array(-56, dtype=int8),
                2: array(6.964575, dtype=float32),
                4: array([4.8222555e-05, 5.9682560e-15, 8.6346928e07], dtype=float32),
            },
            {
                0: array(126, dtype=int8),
                2: array(-1.0, dtype=float32),
                4: array([1.0e00, 1.0e00, 1.0e30], dtype=float32),
            },
            {
                0: array(-5, dtype=int8),
                2: array(0.9179889, dtype=float32),
                4: array([-1.0444309e00, 5.0000000e-01, 3.4028235e38], dtype=float32),
            },
        ],
    ),
    (103, 1062): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "float64", "shape": ()}
                ),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x3", "dtype": "bool", "shape": (4,)}
                ),
                RecipeStep(kind="call", op="op/", args=(Ref(index=0), Ref(index=1)), params={}),
                RecipeStep(kind="call", op=".T", args=(Ref(index=2),), params={}),
                RecipeStep(kind="call", op="logsumexp", args=(Ref(index=2),), params={"axis": (0,)}),
                RecipeStep(kind="call", op="log1mexp", args=(Ref(index=3),), params={}),
                RecipeStep(kind="call", op="true_div", args=(Ref(index=0), Ref(index=5)), params={}),
            ],
            outputs=[6, 4],
            single=False,
        ),
        [
            {0: array(-0.5279530092202658), 1: array([True, True, False, False])},
            {0: array(-1.25229396296442e261), 1: array([True, False, True, True])},
            {0: array(0.0), 1: array([True, True, True, True])},
            {0: array(0.0), 1: array([False, True, True, False])},
        ],
    ),
    (103, 1456): (
        Recipe(
            steps=[
                RecipeStep(
                    kind="input",
                    op="",
                    args=(),
                    params={"name": "x0", "dtype": "float64", "shape": (3, None)},
                ),
                RecipeStep(kind="input", op="", args=(), params={"name": "x1", "dtype": "int8", "shape": ()}),
                RecipeStep(kind="call", op="op>", args=(Ref(index=0), Ref(index=1)), params={}),
                RecipeStep(kind="call", op="log1mexp", args=(Ref(index=1),), params={}),
                RecipeStep(
                    kind="call",
                    op="composite",
                    args=(Ref(index=0), Ref(index=3)),
                    params={
                        "inner": Recipe(
                            steps=[
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i0", "dtype": "float64", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="input",
                                    op="",
                                    args=(),
                                    params={"name": "i1", "dtype": "float16", "shape": ()},
                                ),
                                RecipeStep(
                                    kind="call", op="pow", args=(Ref(index=0), Ref(index=1)), params={}
                                ),
                            ],
                            outputs=[2],
                            single=False,
                        )
                    },
                ),
                RecipeStep(
                    kind="call",
                    op="mul",
                    args=(Ref(index=3), Ref(index=2), Ref(index=4), Ref(index=1)),
                    params={},
                ),
                RecipeStep(kind="call", op="ge", args=(1e-300, Ref(index=2)), params={}),
                RecipeStep(
                    kind="input", op="", args=(), params={"name": "x2", "dtype": "float64", "shape": (3,)}
                ),
                RecipeStep(kind="call", op="minimum", args=(Ref(index=7), Ref(index=3)), params={}),
                RecipeStep(kind="call", op="cast", args=(Ref(index=6),), params={"dtype": "int32"}),
                RecipeStep(kind="call", op="op-x", args=(Ref(index=9),), params={}),
            ],
            outputs=[10, 5, 8],
            single=False,
        ),
        [
            {
                0: array(
                    [
                        [-5.589152889576072, -3.73298481842554, -1.519104913341069],
                        [-2.520189434974432, -0.7060243331800174, -0.5194454039849524],
                        [4.580123121777445, 1.65701611024551, -1.6033654160163686],
                    ]
                ),
                1: array(-2, dtype=int8),
                7: array([20.817959937101552, 35.76305600420767, -34.471280711052884]),
            },
            {
                0: array(
                    [
                        [-2.4192651103815802e267, 1.1583429185053389e-211, -2.9248880341223386e-248],
                        [1.0457058431977859e-277, -7.5446466732639156e034, 2.4587675993571018e-234],
                        [-2.0387127939357280e170, -1.3255315016982936e076, -1.7301200821089835e272],
                    ]
                ),
                1: array(-10, dtype=int8),
                7: array([-1.1505710759598537e298, 4.4023195815302639e-227, 6.0025328552169627e-051]),
            },
            {
                0: array(
                    [
                        [inf, 5.0000000000000000e-001, inf],
                        [1.0000000000000000e-008, 2.0000000000000000e000, nan],
                        [-1.0000000000000001e300, 7.0000000000000000e002, 1.7976931348623157e308],
                    ]
                ),
                1: array(0, dtype=int8),
                7: array([2.2250738585072014e-308, 2.2250738585072014e-308, 0.0000000000000000e000]),
            },
            {
                0: array(
                    [
                        [3.4764955207737404e-002, -1.0542225949814372e-001, -3.8099679991897190e-001],
                        [-2.9780104912475740e000, -1.7976931348623157e308, 7.2075658073905080e-001],
                        [-2.3224037539574993e-001, -1.0000000000000000e000, 5.0000000000000000e-001],
                    ]
                ),
                1: array(0, dtype=int8),
                7: array([-4.3858920036676441e-001, -1.5320442287446467e000, 1.7976931348623157e308]),
            },
        ],
    ),
}
